"""The governed volume benchmark's recovery count: a frame is settled within 5 % of its
target, or as close as the knobs allow."""

from __future__ import annotations

from benchmarks.volume_tuned import recovery_frames, settled

BEST = {"rate": 2.0, "scale": 1.0, "ert": 1.0}
CHEAPEST = {"rate": 0.25, "scale": 0.5, "ert": 0.95}
MIDDLE = {"rate": 1.0, "scale": 0.75, "ert": 0.975}


def _row(ratio: float, knobs: dict) -> dict:
    return {"measured": ratio * 0.01, "target": 0.01, **knobs}


def test_settled_within_tolerance_or_at_the_end_of_the_knobs():
    assert settled(_row(1.04, MIDDLE)) and settled(_row(0.96, MIDDLE))
    assert not settled(_row(0.8, MIDDLE)) and not settled(_row(1.2, MIDDLE))
    assert settled(_row(0.7, BEST))  # cheaper than the target at full quality
    assert not settled(_row(1.3, BEST))  # over target and could go cheaper
    assert settled(_row(1.3, CHEAPEST))  # over target with nothing cheaper left
    assert not settled(_row(0.7, CHEAPEST))


def test_recovery_counts_frames_until_three_settled_in_a_row():
    before = [_row(1.0, MIDDLE)] * 4
    after = [_row(0.7, MIDDLE), _row(0.8, MIDDLE), _row(0.75, BEST), _row(0.72, BEST),
             _row(0.74, BEST), _row(0.7, BEST)]
    assert recovery_frames(before + after, 4) == 2
    assert recovery_frames(before + [_row(0.7, MIDDLE)] * 6, 4) == 6  # never: all it has
