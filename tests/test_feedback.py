"""Slow outer feedback: converges to the model's bias, ignores spikes, stays still under noise."""

import math

import numpy as np
import pytest

from autotune import (
    BiasCorrection,
    BoolKnob,
    FeedForwardController,
    IntKnob,
    KnobSpace,
    PartDrift,
    RunningOverhead,
)

SPACE = KnobSpace([IntKnob("ao_rays", 0, 64), BoolKnob("shadows")])
TARGET = 0.010


def model(c: dict) -> np.ndarray:
    """Synthetic monotone cost model (seconds)."""
    return 0.002 + 0.0001 * c["ao_rays"] + 0.003 * c["shadows"]


def truth(knobs: dict, bias: float = 1.3) -> float:
    """What the 'renderer' really takes: the model off by a constant factor."""
    return bias * (0.002 + 0.0001 * knobs["ao_rays"] + 0.003 * knobs["shadows"])


def quality(knobs: dict) -> float:
    return float(SPACE.quality({k: np.array([v]) for k, v in knobs.items()})[0])


def test_correction_converges_geometrically_to_bias() -> None:
    fb = BiasCorrection(gain=0.1)
    for _ in range(60):
        fb.update(1.0, 1.3)
    assert fb.correction == pytest.approx(1.3, rel=0.01)


def test_single_outlier_is_ignored_but_persistent_change_is_learned() -> None:
    fb = BiasCorrection(gain=0.5, persist=3)
    for _ in range(40):
        fb.update(1.0, 1.0)
    fb.update(1.0, 10.0)
    assert fb.correction == pytest.approx(1.0) and fb.rejected == 1
    for _ in range(40):
        fb.update(1.0, 3.0)
    assert fb.correction == pytest.approx(3.0, rel=0.01)


def test_invalid_samples_leave_correction_alone() -> None:
    fb = BiasCorrection()
    for predicted, measured in [(0.0, 1.0), (1.0, 0.0), (1.0, math.nan), (math.inf, 1.0)]:
        fb.update(predicted, measured)
    assert fb.correction == 1.0


@pytest.mark.parametrize("gain", [0.0, -0.1, 1.5])
def test_gain_must_be_in_unit_interval(gain: float) -> None:
    with pytest.raises(ValueError, match="gain"):
        BiasCorrection(gain=gain)


def run(ctrl: FeedForwardController, frames: int, measure) -> list:
    """Closed loop: choose, 'render', observe; returns (decision, measured) per frame."""
    out = []
    for i in range(frames):
        decision = ctrl.choose(model)
        measured = measure(decision.knobs, i)
        ctrl.observe(measured)
        out.append((decision, measured))
    return out


def test_controller_corrected_prediction_converges_to_measured() -> None:
    ctrl = FeedForwardController(SPACE, TARGET, gain=0.1)
    frames = run(ctrl, 80, lambda k, i: truth(k))
    decision, measured = frames[-1]
    assert ctrl.correction == pytest.approx(1.3, rel=0.01)
    assert decision.corrected == pytest.approx(measured, rel=0.01)
    assert measured <= TARGET


def test_single_10x_spike_drops_quality_for_at_most_two_frames() -> None:
    ctrl = FeedForwardController(SPACE, TARGET)
    settled = run(ctrl, 100, lambda k, i: truth(k))
    q0 = quality(settled[-1][0].knobs)
    after = run(ctrl, 30, lambda k, i: truth(k) * (10.0 if i == 0 else 1.0))
    dropped = sum(quality(d.knobs) < q0 for d, _ in after)
    assert dropped <= 2


def test_noise_on_still_view_does_not_make_knobs_oscillate() -> None:
    rng = np.random.default_rng(1234)
    ctrl = FeedForwardController(SPACE, TARGET)
    noisy = lambda k, i: truth(k) * (1 + rng.uniform(-0.03, 0.03))  # noqa: E731
    run(ctrl, 100, noisy)
    knobs = [d.knobs for d, _ in run(ctrl, 100, noisy)]
    changes = sum(a != b for a, b in zip(knobs, knobs[1:], strict=False))
    assert changes <= 1


def test_without_hysteresis_the_same_noise_does_flip_knobs() -> None:
    """The guard above is not vacuous: the boundary setting is really contested."""
    rng = np.random.default_rng(1234)
    ctrl = FeedForwardController(SPACE, TARGET, hysteresis=0.0)
    noisy = lambda k, i: truth(k) * (1 + rng.uniform(-0.03, 0.03))  # noqa: E731
    run(ctrl, 100, noisy)
    knobs = [d.knobs for d, _ in run(ctrl, 100, noisy)]
    assert sum(a != b for a, b in zip(knobs, knobs[1:], strict=False)) > 1


def test_first_frames_correct_a_large_bias_at_once() -> None:
    fb = BiasCorrection(gain=0.1)
    fb.update(predicted=0.010, measured=0.0167)  # model 40 % low on the very first view
    assert fb.correction == pytest.approx(1.67)
    rng = np.random.default_rng(3)
    for _ in range(5):  # noisy frames average in quickly rather than at the low gain
        fb.update(0.010, 0.0167 * (1 + 0.03 * rng.standard_normal()))
    assert fb.correction == pytest.approx(1.67, rel=0.03)


def _recovery_frames(step: float, noise: float = 0.03, seed: int = 0) -> tuple[int, int]:
    """Closed loop on a noisy plant whose cost steps by ``step`` at frame 40: frames until the
    measured time is back within 5 % of target for good, and misses among the next 100."""
    rng = np.random.default_rng(seed)
    ctrl = FeedForwardController(SPACE, TARGET)
    times = [truth(ctrl.choose(model).knobs, bias=1.0)]
    ctrl.observe(times[0])
    for i in range(1, 140):
        knobs = ctrl.choose(model).knobs
        t = truth(knobs, bias=1.3 * (step if i >= 40 else 1.0)) * rng.normal(1.0, noise)
        ctrl.observe(t)
        times.append(t)
    after = np.abs(np.array(times[40:]) / TARGET - 1.0)
    bad = np.flatnonzero(after > 0.05 + 3 * noise)
    last_bad = int(bad[bad < 30].max()) + 1 if np.any(bad < 30) else 0
    return last_bad, int(np.sum(after[:100] > 0.05 + 3 * noise))


@pytest.mark.parametrize("step", [2.0, 0.75, 1.25])  # the target stays reachable
def test_lasting_cost_change_recovered_within_five_frames(step: float) -> None:
    frames, misses = _recovery_frames(step)
    assert frames <= 5, f"took {frames} frames to return to target after a {step}x step"
    assert misses <= 5


def test_one_frame_spikes_never_move_the_correction_and_noise_never_triggers_a_jump() -> None:
    fb = BiasCorrection()
    rng = np.random.default_rng(3)
    for i in range(400):
        spike = 8.0 if i % 37 == 36 else 1.0
        fb.update(1.0, 1.2 * spike * rng.normal(1.0, 0.03))
    assert fb.correction == pytest.approx(1.2, rel=0.03)
    assert fb.shifts == 0


def test_alternating_spikes_do_not_oscillate() -> None:
    fb = BiasCorrection()
    for _ in range(5):
        fb.update(1.0, 1.0)
    history = []
    for i in range(30):
        fb.update(1.0, 3.0 if i % 2 else 0.33)
        history.append(fb.correction)
    assert max(history) / min(history) < 1.05


def test_part_corrections_follow_each_part_alone():
    from autotune import PartCorrections

    parts = PartCorrections(("primary", "shadow"))
    for _ in range(30):
        parts.update({"primary": 0.010, "shadow": 0.004}, {"primary": 0.010, "shadow": 0.008})
    f = parts.factors()
    assert f["primary"] == pytest.approx(1.0) and f["shadow"] == pytest.approx(2.0, rel=0.01)
    parts.update({"primary": 0.010, "shadow": 0.0}, {"primary": 0.02, "shadow": 0.0})  # off
    assert parts.factors()["shadow"] == pytest.approx(f["shadow"])  # a part that did not run
    with pytest.raises(ValueError, match="at least one part"):
        PartCorrections(())


def test_a_part_far_from_where_it_was_learnt_restarts():
    """A correction learnt on 1 ms of a phase (an empty view's miss rays) is not carried to
    10 ms of it (a full view): rescope restarts it; a part within the factor, or one that
    never learnt, keeps what it has."""
    from autotune import PartCorrections

    parts = PartCorrections(("primary", "shade", "ao"))
    for _ in range(20):
        parts.update({"primary": 0.001, "shade": 0.002}, {"primary": 0.0005, "shade": 0.004})
    assert parts.factors()["primary"] == pytest.approx(0.5, rel=0.01)
    restarted = parts.rescope({"primary": 0.010, "shade": 0.004, "ao": 0.050}, factor=3.0)
    assert restarted == ["primary"]
    f = parts.factors()
    assert f["primary"] == 1.0 and f["shade"] == pytest.approx(2.0, rel=0.01) and f["ao"] == 1.0
    parts.update({"primary": 0.010}, {"primary": 0.012})  # learns afresh at the new size
    assert parts.factors()["primary"] == pytest.approx(1.2, rel=0.01)
    assert parts.rescope({"primary": 0.011}) == []


def test_a_part_scoped_at_fixed_knobs_keeps_its_correction_when_the_knobs_cut_it():
    """Scoped by the workload's price at fixed knobs, a correction is kept when the knobs cut
    the part to a tenth (the same workload); scoped by the predicted seconds, it restarts."""
    from autotune import PartCorrections

    by_knobs, by_prediction = PartCorrections(("ao",)), PartCorrections(("ao",))
    for _ in range(10):  # 30 ms of AO at many rays, measured 60; 3 ms at one ray
        by_knobs.update({"ao": 0.030}, {"ao": 0.060}, {"ao": 0.003})
        by_prediction.update({"ao": 0.030}, {"ao": 0.060})
    by_knobs.update({"ao": 0.003}, {"ao": 0.006}, {"ao": 0.003})  # a tenth of the rays
    by_prediction.update({"ao": 0.003}, {"ao": 0.006})
    assert by_knobs.rescope({"ao": 0.003}) == []
    assert by_knobs.factors()["ao"] == pytest.approx(2.0)
    assert by_prediction.rescope({"ao": 0.003}) == ["ao"]
    assert by_prediction.factors()["ao"] == 1.0


def test_running_overhead_averages_the_first_frames_then_follows_slowly():
    from autotune import RunningOverhead

    overhead = RunningOverhead(gain=0.2)
    for seconds in (0.5, 1.0, 2.0, 3.0):  # the first frame (set-up) is not learnt
        overhead.update(seconds)
    assert overhead.seconds == pytest.approx(2.0)  # the mean of the next frames
    assert (overhead.frames, overhead.learned, overhead.dropped) == (4, 3, 1)
    for _ in range(2):  # frames 4 and 5 still average (weight 1/4, 1/5 >= 0.2)
        overhead.update(2.0)
    overhead.update(5.0)  # within 3x the estimate: the slow average
    assert overhead.seconds == pytest.approx(2.0 + 0.2 * 3.0)
    overhead.update(-5.0)  # a frame faster than its parts: no overhead, not a negative one
    assert overhead.seconds == pytest.approx(0.8 * 2.6)
    with pytest.raises(ValueError, match="gain"):
        RunningOverhead(gain=0.0)
    with pytest.raises(ValueError, match="spike"):
        RunningOverhead(spike=0.5)


def test_running_overhead_drops_a_stall_and_follows_a_lasting_change():
    from autotune import RunningOverhead

    overhead = RunningOverhead(gain=0.5)
    for seconds in (1.0, 0.01, 0.01):
        overhead.update(seconds)
    assert overhead.seconds == pytest.approx(0.01)
    overhead.update(0.2)  # 20x: held, not learnt
    assert overhead.seconds == pytest.approx(0.01)
    overhead.update(0.01)  # the next is back: the held one was a stall
    assert overhead.seconds == pytest.approx(0.01) and overhead.dropped == 2
    overhead.update(0.2)  # held again, and the next is high too: a lasting change
    overhead.update(0.2)
    assert overhead.seconds == pytest.approx(0.01 + 0.75 * 0.19)
    assert overhead.dropped == 2
    tiny = RunningOverhead()
    for seconds in (1.0, 2e-4, 2e-4, 1e-3):  # 5x, but under a millisecond over: learnt
        tiny.update(seconds)
    assert tiny.learned == 3 and tiny.dropped == 1


def test_part_drift_follows_stale_prices_and_restarts_on_a_fresh_measurement() -> None:
    """Each part's factor moves ``gain`` of the way (in log) to measured / priced; a spike
    moves nothing; a fresh measurement brings every factor back to 1."""
    drift = PartDrift(gain=0.5)
    parts = ("ao", "shade")
    drift.update({"ao": 1.0, "shade": 1.0}, {"ao": 1.21, "shade": 1.0})
    assert drift.factors(parts) == pytest.approx({"ao": 1.1, "shade": 1.0})
    drift.update({"ao": 1.1}, {"ao": 11.0})  # a 10x spike
    assert drift.factors(parts)["ao"] == pytest.approx(1.1)
    drift.restart()
    assert drift.factors(parts) == {"ao": 1.0, "shade": 1.0}
    with pytest.raises(ValueError, match="drift gain"):
        PartDrift(gain=0.0)


def test_an_overhead_measured_before_the_loop_prices_the_first_frames() -> None:
    """``start_from`` is the estimate until frames teach; the first frame shown is still left
    out (it builds the search's tables), the next averages in at half weight."""
    overhead = RunningOverhead()
    overhead.start_from(0.002)
    assert overhead.seconds == 0.002
    overhead.update(0.010)  # the first frame: left out
    assert overhead.seconds == 0.002 and overhead.dropped == 1
    overhead.update(0.004)
    assert overhead.seconds == pytest.approx(0.003)
