"""The per-rank volume model: fits recover known coefficients, sections aggregate by max / sum."""

import numpy as np
import pytest

from models.volume_cost import (
    ClusterFrameModel,
    GatherModel,
    RenderModel,
    StageModel,
    StageWork,
    VolumeModelError,
)


def test_render_fit_recovers_coefficients():
    rng = np.random.default_rng(0)
    samples = rng.uniform(1e5, 5e6, 40)
    rays = rng.uniform(1e3, 2e5, 40)
    pixels = rng.choice([65536.0, 262144.0], 40)
    skipped = rng.uniform(1e5, 2e7, 40)
    truth = RenderModel(2e-9, 3e-10, 5e-8, 1e-9, 1e-3)
    y = truth.predict(samples, skipped, rays, pixels) * rng.normal(1.0, 0.002, 40)
    fit = RenderModel.fit(samples, skipped, rays, pixels, y)
    assert fit.per_sample == pytest.approx(2e-9, rel=0.02)
    assert fit.constant == pytest.approx(1e-3, rel=0.2)
    assert fit.fit_error < 0.01


def test_fit_rejects_bad_rows():
    with pytest.raises(VolumeModelError, match="cannot fit"):
        RenderModel.fit([1.0], [1.0], [1.0], [1.0], [1.0])
    with pytest.raises(VolumeModelError, match="finite"):
        RenderModel.fit([1.0] * 6, [1.0] * 6, [1.0] * 6, [1.0] * 6,
                        [1.0, 1.0, np.nan, 1.0, 1.0, 1.0])
    with pytest.raises(VolumeModelError, match=">= 0"):
        RenderModel(-1.0, 0.0, 0.0, 0.0, 0.0)


def test_frame_is_max_render_plus_sum_of_stage_maxima():
    render = (RenderModel(1e-9, 0, 0, 0, 0.0), RenderModel(1e-9, 0, 0, 0, 0.01))
    model = ClusterFrameModel(render, StageModel(1e-3, 1e-9, 0.0), GatherModel(2e-3, 0.0))
    stages = [[StageWork(1, 1, 1e6, 0), StageWork(1, 1, 3e6, 0)]]
    samples = np.array([[1e7, 2e7], [1e6, 1e6]])  # rank 0 heavy, rank 1 light
    zero = np.zeros_like(samples)
    out = model.predict_sections(samples, zero, zero, np.zeros(2), stages, 0.0,
                                 image_scale=np.array([1.0, 0.5]))
    np.testing.assert_allclose(out["render"], [0.011, 0.02])
    np.testing.assert_allclose(out["stage0"], [1e-3 + 3e-3, 1e-3 + 0.75e-3])
    np.testing.assert_allclose(out["frame"], out["render"] + out["stage0"] + 2e-3)


def test_round_trip_and_bad_dict():
    model = ClusterFrameModel((RenderModel(1e-9, 0, 0, 0, 0),) * 2, StageModel(0, 1e-9, 0),
                              GatherModel(0, 0), meta={"device": "x"}, cores=1.0,
                              core_groups=(0, 0))
    again = ClusterFrameModel.from_dict(model.to_dict())
    assert again == model
    with pytest.raises(VolumeModelError, match="bad.json"):
        ClusterFrameModel.from_dict({"render": []}, where="bad.json")


def test_joint_compositing_fit_recovers_stage_and_gather_terms():
    from models.volume_cost import fit_compositing

    rng = np.random.default_rng(2)
    ratio = rng.uniform(1, 4, 30)
    nbytes = rng.uniform(1e6, 3e7, 30)
    pixels = nbytes / 16 * rng.uniform(0.8, 1.2, 30)
    gbytes = rng.uniform(1e6, 2e7, 30)
    y = 2e-4 * ratio + 1e-9 * nbytes + 3e-9 * pixels + 1e-3 + 0.5e-9 * gbytes
    stage, gather = fit_compositing(ratio, nbytes, pixels, gbytes, y)
    assert stage.per_byte == pytest.approx(1e-9, rel=0.05)
    assert gather.constant == pytest.approx(1e-3, rel=0.1)


def test_render_fit_shrugs_off_contention_spikes():
    rng = np.random.default_rng(4)
    samples = rng.uniform(1e5, 5e6, 24)
    skipped = rng.uniform(1e5, 2e7, 24)
    rays = rng.uniform(1e3, 2e5, 24)
    pixels = rng.choice([65536.0, 262144.0], 24)
    truth = RenderModel(2e-8, 0.0, 0.0, 0.0, 2e-3)
    y = truth.predict(samples, skipped, rays, pixels)
    y[[3, 11, 17]] *= 3.0  # three frames that shared their core with another job
    fit = RenderModel.fit(samples, skipped, rays, pixels, y)
    clean = np.delete(np.arange(24), [3, 11, 17])
    want = truth.predict(samples, skipped, rays, pixels)
    err = np.abs(fit.predict(samples, skipped, rays, pixels) - want)[clean] / want[clean]
    assert err.mean() < 0.02  # plain least squares: 4.2 %


def test_render_fit_tells_cached_from_streamed_samples():
    """Frames of two working sets (a streamed share of 0.1 and 0.8) recover a per-sample cost
    that is 3x higher streamed than cached; one working set ties the two costs together."""
    from models.volume_cost import streamed_share

    rng = np.random.default_rng(1)
    n = 40
    samples, skipped = rng.uniform(1e5, 5e6, n), rng.uniform(1e5, 2e7, n)
    rays, pixels = rng.uniform(1e3, 2e5, n), rng.choice([65536.0, 262144.0], n)
    m = np.where(np.arange(n) % 2 == 0, 0.1, 0.8)
    truth = RenderModel(1e-9, 2e-10, 5e-8, 1e-9, 1e-3, per_sample_streamed=3e-9,
                        per_skipped_streamed=2e-10)
    y = truth.predict(samples, skipped, rays, pixels, m)
    fit = RenderModel.fit(samples, skipped, rays, pixels, y, m)
    assert fit.per_sample == pytest.approx(1e-9, rel=0.05)
    assert fit.per_sample_streamed == pytest.approx(3e-9, rel=0.05)
    one = RenderModel.fit(samples, skipped, rays, pixels, y, 0.5)
    assert one.per_sample == one.per_sample_streamed
    assert streamed_share([0.0, 1 << 20], 1 << 20).tolist() == [0.0, 0.5]
    with pytest.raises(VolumeModelError, match="cache size"):
        streamed_share([1.0], 0.0)


def test_render_fit_recovers_the_cost_of_crossing_slices():
    """Views from many directions (slice crossings 0.05-0.95) recover a sample's extra cost
    per unit of crossing, cached and streamed; frames from one direction cannot tell it from
    a sample's own cost and get none."""
    rng = np.random.default_rng(2)
    n = 48
    samples, skipped = rng.uniform(1e5, 5e6, n), rng.uniform(1e5, 2e7, n)
    rays, pixels = rng.uniform(1e3, 2e5, n), rng.choice([65536.0, 262144.0], n)
    z = rng.uniform(0.05, 0.95, n)
    for m in (0.5, np.where(np.arange(n) % 2 == 0, 0.1, 0.8)):
        truth = RenderModel(1e-9, 2e-10, 5e-8, 1e-9, 1e-3, 3e-9, 2e-10,
                            per_sample_crossing=1e-9)
        y = truth.predict(samples, skipped, rays, pixels, m, z)
        fit = RenderModel.fit(samples, skipped, rays, pixels, y, m, z)
        assert fit.per_sample_crossing == pytest.approx(1e-9, rel=0.05)
        np.testing.assert_allclose(fit.predict(samples, skipped, rays, pixels, m, z), y,
                                   rtol=0.01)
    one = RenderModel.fit(samples, skipped, rays, pixels, y, m, 0.4)
    assert one.per_sample_crossing == 0.0


def test_render_fit_recovers_the_plane_crossing_cost():
    """A sample costs more as the image plane runs along the z slices: the fit recovers the
    cost per unit of plane crossing beside the slice crossing's; frames with one image plane
    cannot tell it apart and get none."""
    rng = np.random.default_rng(4)
    n = 48
    samples, skipped = rng.uniform(1e5, 5e6, n), rng.uniform(1e5, 2e7, n)
    rays, pixels = rng.uniform(1e3, 2e5, n), rng.choice([65536.0, 262144.0], n)
    z, q = rng.uniform(0.05, 0.95, n), rng.uniform(0.0, 1.4, n)
    truth = RenderModel(1e-9, 2e-10, 5e-8, 1e-9, 1e-3, 3e-9, 2e-10, per_sample_crossing=1e-9,
                        per_sample_plane=2e-9)
    y = truth.predict(samples, skipped, rays, pixels, 0.5, z, 0.0, q)
    fit = RenderModel.fit(samples, skipped, rays, pixels, y, 0.5, z, 0.0, q)
    assert fit.per_sample_plane == pytest.approx(2e-9, rel=0.05)
    assert fit.per_sample_crossing == pytest.approx(1e-9, rel=0.05)
    one = RenderModel.fit(samples, skipped, rays, pixels, y, 0.5, z, 0.0, 0.7)
    assert one.per_sample_plane == 0.0


@pytest.mark.parametrize("ranks, cores, threads, groups", [
    (2, np.inf, 1.0, ()), (2, 1.0, 1.0, ()), (5, 2.0, 1.0, ()), (4, 4.0, 2.0, ()),
    (4, 2.0, 1.0, (0, 1, 0, 1)), (5, 2.0, 1.0, (0, 1, 0, 1, 0)), (2, 2.0, 1.0, (3, 7))])
def test_compiled_grid_render_equals_the_general_path(ranks, cores, threads, groups):
    """The tuner's compiled pricing is the general path's slowest rank, bit for bit, shared
    cores or not: the same formula in the same order of operations."""
    rng = np.random.default_rng(ranks)
    render = tuple(RenderModel(*rng.uniform(1e-9, 2e-8, 2), 1e-7 * rng.uniform(), 1e-8,
                               1e-3 * rng.uniform(), *rng.uniform(1e-9, 3e-8, 3),
                               2e-8 * rng.uniform(), 1e-8 * rng.uniform())
                   for _ in range(ranks))
    model = ClusterFrameModel(render, StageModel(1e-4, 1e-10, 1e-9), GatherModel(1e-4, 1e-10),
                              cores=cores, threads=threads, core_groups=groups)
    length = rng.uniform(5, 80, (3, ranks))
    span = length + rng.uniform(0, 40, (3, ranks))
    jumps = rng.uniform(0, 12, (3, ranks))
    rays = rng.uniform(0.1, 1.0, ranks)
    ratio = rng.uniform(1.0, 2.0, (3, ranks, 4))
    streamed = rng.uniform(0, 1, ranks)
    correction = rng.uniform(0.7, 1.4, ranks)
    crossing, plane = rng.uniform(0, 1), rng.uniform(0, 1.4)
    threshold, scale_of = rng.integers(0, 3, 300), rng.integers(0, 4, 300)
    pixels = rng.uniform(1e4, 3e5, 300)
    per_step = pixels * rng.uniform(0.25, 2.0, 300)
    compiled = model.slowest_render_on_grid(length, span, jumps, rays, ratio, streamed,
                                            crossing, threshold, scale_of, pixels, per_step,
                                            correction, plane_crossing=plane)
    samples = length[threshold].T * per_step * ratio[threshold, :, scale_of].T
    skipped = (span - length)[threshold].T * per_step
    work = model.rank_work(samples, skipped, rays[:, None] * pixels, pixels, streamed,
                           crossing, jumps[threshold].T * pixels, plane) * correction[:, None]
    general = model.sections_of(work, {"composite": 0.0, "gather": 0.0})["render"]
    np.testing.assert_array_equal(compiled, general)


def test_the_fewest_calibration_frames_fit_one_volumes_render_model():
    """``--calibration-frames`` (``autotune volume`` and the viewer) asks for as many frames
    as the model needs: the first is not fitted, the rest fit one volume's render model
    (views from several directions), and one fewer cannot."""
    from autotune_app.options import MIN_CALIBRATION_FRAMES

    rng = np.random.default_rng(3)
    n = MIN_CALIBRATION_FRAMES - 1
    rows = [rng.uniform(1e5, 5e6, n), rng.uniform(1e5, 2e7, n), rng.uniform(1e3, 2e5, n),
            rng.choice([65536.0, 262144.0], n), rng.uniform(1e-3, 1e-2, n)]
    z = rng.uniform(0.05, 0.95, n)
    jumps = rng.uniform(1e3, 5e5, n)
    plane = rng.uniform(0.0, 1.4, n)
    RenderModel.fit(*rows, 0.5, z, jumps, plane)
    with pytest.raises(VolumeModelError, match="cannot fit"):
        RenderModel.fit(*(r[1:] for r in rows), 0.5, z[1:], jumps[1:], plane[1:])
