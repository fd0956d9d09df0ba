"""The governed volume renderer's probe policy: which frames probe their view, what a frame
between probes is priced with, what a frame teaches, and that a baseline pays for no probe."""

import copy
import dataclasses
import threading

import numpy as np
import pytest

from autotune_app.options import MIN_CALIBRATION_FRAMES
from governed.volume.knobs import volume_knob_space
from governed.volume.model_fit import VolumeModel, volume_calibration_views
from governed.volume.tuned_volume import TunedVolumeRenderer
from governed.volume.workload_probe import WorkloadProbe
from models.volume_cost import ClusterFrameModel
from raytracer.camera import Camera
from raytracer.volume.distributed import (
    DistributedRenderer,
    FrameSettings,
    load_everywhere,
    seed_orbit,
)


@pytest.fixture(scope="module")
def tuned():
    vol, tf = load_everywhere("bonsai")
    t = TunedVolumeRenderer(DistributedRenderer(vol, tf), 48, 48, 0.05)
    t.calibrate(volume_calibration_views(vol.radius, 3), frames=MIN_CALIBRATION_FRAMES)
    return t


@pytest.fixture
def counted(tuned, monkeypatch):
    """The tuned renderer with its probes and its pricings of the candidate grid counted."""
    probes, prices = [], []
    probe = tuned.probe
    monkeypatch.setattr(tuned, "probe", lambda *a: probes.append(a[0]) or probe(*a))
    call = VolumeModel.__call__
    monkeypatch.setattr(VolumeModel, "__call__",
                        lambda self, knobs, **kw: prices.append(1) or call(self, knobs, **kw))
    tuned.use_controller("feedforward")
    return tuned, probes, prices


def orbit(tuned, frames=6):
    """Views 6 degrees apart: neither a cut nor a jump."""
    return seed_orbit(tuned.renderer.volume.radius, 60)[:frames]


def test_always_probes_and_prices_every_frame(counted):
    tuned, probes, prices = counted
    tuned.probe_policy = "always"
    frames = [tuned.render(cam) for cam in orbit(tuned, 16)[10:]]
    assert len(probes) == len(prices) == 6 and all(f.probe_seconds > 0 for f in frames)


def test_never_probes_the_first_frame_only_and_keeps_its_prices(counted):
    """Between probes the candidates keep the prices of the last probe; the frame loop's
    feedback still learns from every frame."""
    tuned, probes, prices = counted
    tuned.probe_policy = "never"
    observed = len(tuned.loop.tuner.history)
    frames = [tuned.render(cam) for cam in orbit(tuned)]
    assert len(probes) == len(prices) == 1
    assert frames[0].probe_seconds > 0 and all(f.probe_seconds == 0 for f in frames[1:])
    # every frame is priced as the first (the controller starts afresh: no correction yet)
    assert all(f.pricing is frames[0].pricing for f in frames)
    assert frames[0].sections["frame"] == pytest.approx(frames[0].predicted, rel=1e-12)
    assert len(tuned.loop.tuner.history) == observed + 6


def test_frames_between_probes_move_the_price_by_their_drift(counted):
    """A frame priced on an older probe teaches the drift, which moves every candidate's
    modelled price alike until the next fresh probe restarts it."""
    tuned, probes, _ = counted
    tuned.probe_policy = "never"
    [tuned.render(cam) for cam in orbit(tuned, 26)[20:]]  # views no other test renders
    drift = tuned.drift.factors(("frame",))["frame"]
    assert len(probes) == 1 and drift != 1.0
    knobs, base, _ = tuned._priced
    np.testing.assert_allclose(tuned._price(knobs).modelled, base * drift, rtol=1e-12)
    tuned.probe_policy = "always"
    tuned.render(orbit(tuned, 27)[26])
    assert len(probes) == 2 and tuned.drift.factors(("frame",))["frame"] == 1.0


def test_on_change_probes_a_jump_and_not_a_still_view(counted):
    tuned, probes, _ = counted
    tuned.probe_policy = "on-change"
    a = orbit(tuned, 41)[40]  # a view no test rendered before
    tuned.render(a)  # a new schedule probes its first frame
    tuned.render(a)  # the same view: the probe is deterministic
    assert len(probes) == 1
    opposite = Camera(tuple(-x for x in a.eye), a.target, a.up, a.fov_y)
    tuned.render(opposite)  # the view turned 180 degrees: a cut
    assert len(probes) == 2 and probes[-1] == opposite


def test_a_resize_probes_again(counted):
    tuned, probes, _ = counted
    tuned.probe_policy = "never"
    cam = orbit(tuned, 31)[30]
    tuned.render(cam)
    tuned.resize(40, 40)
    tuned.render(cam)
    tuned.resize(48, 48)
    assert len(probes) == 2


def test_a_baseline_pays_for_no_probe_and_feed_forward_probes_again(counted):
    tuned, probes, prices = counted
    tuned.probe_policy = "never"
    tuned.use_controller("pi")
    frames = [tuned.render(cam) for cam in orbit(tuned, 3)]
    assert probes == [] and prices == [] and all(f.probe_seconds == 0 for f in frames)
    assert all(f.sections == {} for f in frames)
    tuned.use_controller("feedforward")
    tuned.render(orbit(tuned, 21)[20])  # priced again: from a fresh probe, whatever the policy
    assert len(probes) == 1


def test_unknown_probe_policy_is_one_clear_error(tuned):
    with pytest.raises(ValueError, match="probe policy must be one of"):
        tuned.probe_policy = "sometimes"


def test_a_rendered_candidates_work_is_read_from_its_pricing(tuned, monkeypatch):
    """What a frame is set against (each rank's uncorrected work at its settings) is read
    from the pricing that chose it, and equals the same setting priced on its own; a setting
    off the grid, and any after a frame's record taught the model, are priced afresh."""
    reads = []
    read_one = ClusterFrameModel.candidate_render_work
    monkeypatch.setattr(ClusterFrameModel, "candidate_render_work",
                        lambda *a: reads.append(1) or read_one(*a))
    model = copy.copy(tuned.model)
    workload = tuned.probe(orbit(tuned)[2], tuned.width, tuned.height)
    grid = volume_knob_space().grid()
    for j in (0, 17, 250, 539):
        settings = FrameSettings(step=1.0 / grid["sampling_rate"][j],
                                 image_scale=grid["image_scale"][j],
                                 ert_threshold=grid["ert_threshold"][j])
        model.workload = workload
        model(grid)
        read = model.uncorrected_rank_work(settings)
        model.workload = copy.copy(workload)  # the same work, not the workload priced
        np.testing.assert_allclose(read, model.uncorrected_rank_work(settings), rtol=1e-12)
        assert len(reads) == 1  # the first read from the pricing, the second priced afresh
        reads.clear()
    off_grid = FrameSettings(step=1.0 / 0.3, image_scale=0.6, ert_threshold=0.99)
    model.workload = workload
    assert model.uncorrected_rank_work(off_grid).shape == (model.model.ranks,) and reads == []


def _ahead_run(tuned, monkeypatch, cameras, next_cameras):
    """Governed frames with the next view probed ahead (as on a device that is not the CPU):
    per frame the workload it was priced on, and the threads every probe ran on."""
    threads, priced = [], []
    call = WorkloadProbe.__call__
    monkeypatch.setattr(WorkloadProbe, "__call__", lambda self, *a: threads.append(
        threading.current_thread().name) or call(self, *a))
    price = VolumeModel.__call__
    monkeypatch.setattr(VolumeModel, "__call__", lambda self, knobs, **kw: priced.append(
        self.workload) or price(self, knobs, **kw))
    tuned.use_controller("feedforward")
    tuned.probe_policy = "always"  # every frame priced on a probe of its own view
    assert not tuned.probe_ahead  # a CPU device: the probe would take the frame's cores
    monkeypatch.setattr(tuned, "probe_ahead", True)
    frames = [tuned.render(cam, nxt) for cam, nxt in zip(cameras, next_cameras, strict=True)]
    tuned.probe.close()  # the last probe ahead done
    return frames, priced, threads


def test_a_view_probed_ahead_stands_in_for_its_probe(tuned, monkeypatch):
    """The next view probed during the frame is the next frame's probe: the frame probes
    nothing itself, and it is priced on the very workload its own probe gives (the probe is
    deterministic)."""
    views = orbit(tuned, 6)
    frames, priced, threads = _ahead_run(tuned, monkeypatch, views, [*views[1:], None])
    on_frame = [t for t in threads if not t.startswith("volume-probe")]
    assert len(on_frame) == 1 and len(threads) == 6  # the first view, then 5 ahead
    assert len(priced) == 6 and all(f.probe_seconds >= 0 for f in frames)
    for cam, workload in zip(views, priced, strict=True):
        own = tuned.probe(cam, tuned.width, tuned.height)
        np.testing.assert_array_equal(workload.length, own.length)
        np.testing.assert_array_equal(workload.rays, own.rays)


def test_a_view_probed_ahead_is_not_taken_for_another(tuned, monkeypatch):
    """A path that cuts elsewhere than the view probed ahead probes its own view."""
    views = orbit(tuned, 4)
    wrong = [dataclasses.replace(c, eye=tuple(-x for x in c.eye)) for c in views[1:]]
    frames, priced, threads = _ahead_run(tuned, monkeypatch, views, [*wrong, None])
    assert len([t for t in threads if not t.startswith("volume-probe")]) == 4
    assert all(f.probe_seconds > 0 for f in frames)


def test_feed_forward_settles_its_raises_on_a_still_view_only(counted):
    """Along a path a raise is the view getting cheaper, on a still view it is noise."""
    tuned = counted[0]
    views = orbit(tuned, 3)
    tuned.render(views[0])
    tuned.render(views[1])
    assert tuned.loop.tuner.controller.settling is False  # moved since the last frame
    tuned.render(views[1])
    assert tuned.loop.tuner.controller.settling is True  # still
    tuned.render(views[2])
    assert tuned.loop.tuner.controller.settling is False
