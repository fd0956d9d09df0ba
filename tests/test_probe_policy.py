"""Which frames each probe policy probes (pure: no renderer)."""

from __future__ import annotations

import math

import pytest

from governed.probe_policy import ProbeSchedule, view_change
from raytracer.camera import Camera

DIAGONAL = 2.0


def camera(degrees: float, distance: float = 1.0) -> Camera:
    """A camera at ``distance`` from the origin, ``degrees`` round the y axis, looking at it."""
    a = math.radians(degrees)
    return Camera((distance * math.sin(a), 0.0, distance * math.cos(a)), (0.0, 0.0, 0.0))


def probes(schedule: ProbeSchedule, cameras: list[Camera], change: float = 0.0) -> list[int]:
    """The frames ``schedule`` probes along ``cameras``, each probe ``change`` from the last."""
    out = []
    for i, cam in enumerate(cameras):
        if schedule.due(cam, DIAGONAL):
            schedule.probed(cam, None if not out else change)
            out.append(i)
    return out


def test_always_probes_every_frame_and_never_only_the_first():
    path = [camera(d) for d in range(10)]
    assert probes(ProbeSchedule("always"), path) == list(range(10))
    assert probes(ProbeSchedule("never"), path) == [0]


def test_on_change_spaces_its_probes_by_how_fast_the_workload_drifts():
    path = [camera(0.5 * d) for d in range(40)]
    assert probes(ProbeSchedule("on-change"), path, change=0.0) == [0, 1, 17, 33]  # steady
    assert probes(ProbeSchedule("on-change"), path, change=0.5) == list(range(40))
    s = ProbeSchedule("on-change", drift=0.03)
    s.due(path[0], DIAGONAL)
    s.probed(path[0], None)
    for cam in path[1:5]:
        s.due(cam, DIAGONAL)
    s.probed(path[4], 0.04)  # 2 % beyond the scatter in 4 frames: 0.5 % a frame, 3 % in 6
    assert s.interval == 6
    s.probed(path[5], 0.015)  # within the probe's own scatter: no drift
    assert s.interval == s.max_interval


def test_on_change_probes_a_jump_at_once_and_never_a_view_it_already_probed():
    s = ProbeSchedule("on-change")
    assert s.due(camera(0), DIAGONAL)
    s.probed(camera(0), None)
    s.interval = 16
    assert not s.due(camera(0), DIAGONAL)  # the same view: the probe is deterministic
    assert not s.due(camera(5), DIAGONAL)  # a small step within the interval
    assert s.due(camera(45), DIAGONAL)  # a turn beyond jump_degrees


def test_a_mispriced_frame_makes_the_next_new_view_probe():
    s = ProbeSchedule("on-change")
    probes(s, [camera(0), camera(0.1)], change=0.0)
    s.interval = 16
    assert not s.due(camera(0.2), DIAGONAL)
    s.observed(corrected=0.05, measured=0.06)  # 17 % off
    assert s.due(camera(0.3), DIAGONAL)
    s.probed(camera(0.3), 0.0)
    s.observed(corrected=0.059, measured=0.06)  # within the noise
    assert not s.due(camera(0.4), DIAGONAL)


def test_a_frame_mispriced_on_its_own_probe_does_not_probe_again():
    s = ProbeSchedule("on-change")
    probes(s, [camera(0), camera(0.1)], change=0.0)
    s.interval = 16
    assert s.due(camera(5.0), DIAGONAL) is False
    s.restart()
    assert s.due(camera(5.1), DIAGONAL)
    s.probed(camera(5.1), 0.0)
    s.observed(corrected=0.05, measured=0.06)  # 17 % off, on a fresh probe: the model's miss
    assert not s.due(camera(5.2), DIAGONAL)
    s.observed(corrected=0.05, measured=0.06)  # again, now on the probe of the frame before
    assert s.due(camera(5.3), DIAGONAL)


def test_restart_probes_whatever_the_policy():
    s = ProbeSchedule("never")
    probes(s, [camera(0)])
    assert not s.due(camera(90), DIAGONAL)
    s.restart()
    assert s.due(camera(90), DIAGONAL)
    assert s.last_probed == camera(0)  # a restart asks for a probe; the last one stays known


def test_view_change_is_the_larger_of_turn_and_move():
    def looking(degrees: float) -> Camera:  # turning in place
        a = math.radians(degrees)
        return Camera((0.0, 0.0, 0.0), (math.sin(a), 0.0, math.cos(a)))

    assert view_change(looking(0), looking(10), DIAGONAL, 20.0, 0.1) == pytest.approx(0.5)
    moved = view_change(camera(0, 1.0), camera(0, 1.4), DIAGONAL, 20.0, 0.1)  # straight back
    assert moved == pytest.approx(0.4 / DIAGONAL / 0.1)
    both = view_change(camera(0), camera(10), DIAGONAL, 20.0, 0.1)  # the eye moves 0.17
    assert both == pytest.approx(2 * math.sin(math.radians(5)) / DIAGONAL / 0.1)


def test_an_unknown_policy_is_one_clear_error():
    with pytest.raises(ValueError, match="always, on-change, never"):
        ProbeSchedule("sometimes")


def test_on_change_probes_every_new_view_while_the_model_learns_and_never_does_not():
    path = [camera(0.5 * d) for d in range(8)]
    for policy, expected in (("on-change", [0, 1, 2, 3, 4]), ("never", [0])):
        schedule, out = ProbeSchedule(policy), []
        for i, cam in enumerate(path):  # learning over the first 5 frames, no drift
            if schedule.due(cam, DIAGONAL, learning=i < 5):
                schedule.probed(cam, None if not out else 0.0)
                out.append(i)
        assert out == expected, policy
    still = ProbeSchedule("on-change")
    assert still.due(path[0], DIAGONAL, learning=True)
    still.probed(path[0], None)
    assert not still.due(path[0], DIAGONAL, learning=True)  # the same view: nothing to learn
