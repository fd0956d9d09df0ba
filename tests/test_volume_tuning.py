"""The governed volume renderer: probe estimates, every knob priced, a governed run end to end."""

import copy
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from autotune_app.options import MIN_CALIBRATION_FRAMES
from governed.volume.control_settings import FEEDBACK_GAIN
from governed.volume.knobs import BEST, QualityLosses, volume_knob_space
from governed.volume.model_fit import (
    DEFAULT_CORE_CACHE,
    VolumeModel,
    core_cache_bytes,
    counted_render_models,
    volume_calibration_views,
)
from governed.volume.tuned_volume import WARMUP_FRAMES, TunedVolumeRenderer
from governed.volume.workload_probe import BlockGrid, WorkloadProbe, brick_boxes, probe_workload
from models.volume_cost import (
    ClusterFrameModel,
    GatherModel,
    RenderModel,
    StageModel,
    StageWork,
    VolumeModelError,
)
from raytracer.camera import Camera
from raytracer.mpi.launch import launch
from raytracer.volume.distributed import (
    DistributedRenderer,
    RankTiming,
    load_everywhere,
    seed_orbit,
)
from raytracer.volume.partition import kd_partition
from raytracer.volume.raycaster import Raycaster


@pytest.fixture(scope="module")
def bonsai():
    return load_everywhere("bonsai")


def test_probe_estimates_each_bricks_samples_and_rays(bonsai):
    vol, tf = bonsai
    part = kd_partition(vol.dims, 3, vol.spacing)
    grid = BlockGrid.for_volume(vol, tf)
    cam = volume_calibration_views(vol.radius, 1)[0]
    thresholds = np.array([0.95, 1.0])
    w = probe_workload(grid, cam, 96, 64, brick_boxes(part), thresholds, rays=4096)
    for brick in part.bricks:
        estimates = []
        for j, ert in enumerate(thresholds):
            img = Raycaster(vol, tf, brick).render(cam, 96, 64, step=0.5, ert_threshold=ert)
            est = w.samples(np.array([j]), np.array([96 * 64 / 0.5]))[brick.index, 0]
            estimates.append(est)
            # without termination the block grid sees exactly where samples are taken; with
            # it, the blocks' mean opacity only approximates where rays turn opaque (the
            # per-rank model's fit absorbs a steady bias)
            assert est == pytest.approx(img.samples, rel=0.2 if ert == 1.0 else 0.6), (brick,
                                                                                      ert)
            rays = w.ray_counts(np.array([96 * 64]))[brick.index, 0]
            assert rays == pytest.approx(img.rays, rel=0.1, abs=20)
        assert estimates[0] <= estimates[1]  # termination never adds samples


def test_probe_prices_threshold_one_where_the_caster_stops(bonsai):
    """The caster stops an opaque ray at threshold 1 too: the probe's samples at 1 stand in the
    same ratio to the caster's as at any other threshold, at a fine and a coarse step."""
    vol, tf = bonsai
    part = kd_partition(vol.dims, 2, vol.spacing)
    cam = seed_orbit(vol.radius, 12, orbits=1.0, phase=0.5)[0]
    thresholds = np.array([0.975, 1.0])
    w = probe_workload(BlockGrid.for_volume(vol, tf), cam, 96, 64, brick_boxes(part),
                       thresholds, rays=4096)
    for brick in part.bricks:
        caster = Raycaster(vol, tf, brick)
        for step in (0.5, 4.0):
            ratios = [w.samples(np.array([j]), np.array([96 * 64 / step]))[brick.index, 0]
                      / caster.render(cam, 96, 64, step, ert).samples
                      for j, ert in enumerate(thresholds)]
            assert ratios[1] == pytest.approx(ratios[0], rel=0.05), (brick, step, ratios)


def test_every_knob_changes_the_prediction(bonsai):
    """A knob the model cannot price is a knob the tuner always turns up: with a real probe
    workload and any positive per-sample cost, each cheaper level predicts less."""
    vol, tf = bonsai
    part = kd_partition(vol.dims, 2, vol.spacing)
    grid = BlockGrid.for_volume(vol, tf)
    thresholds = np.array([0.95, 0.975, 1.0])
    cam = seed_orbit(vol.radius, 4)[1]
    render = tuple(RenderModel(2e-8, 1e-9, 1e-7, 1e-9, 1e-3) for _ in part.bricks)
    model = VolumeModel(ClusterFrameModel(render, StageModel(1e-4, 1e-10, 1e-9),
                                          GatherModel(1e-4, 1e-10)), 1e-9, 64, 64, thresholds)
    model.workload = probe_workload(grid, cam, 64, 64, brick_boxes(part), thresholds)
    model.stages = [[StageWork(1, 1, 64 * 64 * 8.0, 64 * 64 / 2.0) for _ in part.bricks]]
    model.gather_bytes = 64 * 64 * 8.0
    base = {"sampling_rate": np.array([2.0]), "image_scale": np.array([1.0]),
            "ert_threshold": np.array([1.0])}
    full = model(base)[0]
    for knob, cheaper in (("sampling_rate", 0.5), ("image_scale", 0.5), ("ert_threshold", 0.95)):
        assert model(base | {knob: np.array([cheaper])})[0] < full, knob


def test_quality_losses_interpolate_the_rate_and_scale_grid_bilinearly():
    """The rate x scale grid's loss at its points, bilinear between them, clamped outside,
    plus the threshold's sweep: a grid whose losses do not add (a low rate costs little at a
    low scale) ranks a low rate at a low scale above what the sum of the two sweeps would."""
    rates, scales = np.array([0.25, 1.0, 2.0]), np.array([0.5, 1.0])
    joint = np.array([[0.05, 0.04], [0.03, 0.01], [0.03, 0.0]])
    ert = (np.array([0.95, 1.0]), np.array([0.002, 0.0]))
    losses = QualityLosses(rates, scales, joint, {"ert_threshold": ert})

    def quality(rate, scale, threshold=1.0):
        return losses.quality({"sampling_rate": np.array([rate]),
                               "image_scale": np.array([scale]),
                               "ert_threshold": np.array([threshold])})[0]

    for i, r in enumerate(rates):
        for j, sc in enumerate(scales):
            assert quality(r, sc) == -joint[i, j]
    assert quality(2.0, 1.0, 0.95) == pytest.approx(-0.002)
    assert quality(1.5, 0.75) == pytest.approx(-(0.03 + 0.01 + 0.03 + 0.0) / 4)
    assert quality(0.1, 0.4) == -joint[0, 0] and quality(3.0, 1.2) == 0.0  # clamped
    summed = joint[0, -1] + joint[-1, 0]  # the two sweeps' losses at (0.25, 0.5), added
    assert -quality(0.25, 0.5) < summed
    assert set(losses.to_dict()) == {"sampling_rate_x_image_scale", "ert_threshold"}


def test_calibrated_run_measures_quality_and_governs_frames(bonsai):
    vol, tf = bonsai
    renderer = DistributedRenderer(vol, tf)
    tuned = TunedVolumeRenderer(renderer, 48, 48, 0.05)
    tuned.calibrate(volume_calibration_views(vol.radius, 3), frames=MIN_CALIBRATION_FRAMES)
    # the volume's first frame warms it up
    assert len(tuned.calibration_samples) == MIN_CALIBRATION_FRAMES - 1
    assert tuned.loop.tuner.controller.feedback.gain == FEEDBACK_GAIN
    losses = tuned.losses
    for name, (_values, loss) in losses.sweeps.items():
        assert loss[-1] == 0.0 and np.all(np.diff(loss) <= 0), name
    assert list(losses.sweeps) == ["ert_threshold"]  # the rate and scale measured together
    assert losses.joint.shape == (len(losses.rates), len(losses.scales))
    assert losses.joint[-1, -1] == 0.0 and losses.joint[0, 0] > 0.0
    assert np.all(np.diff(losses.joint, axis=0) <= 0) and np.all(np.diff(losses.joint, axis=1) <= 0)
    space = volume_knob_space(tuned.losses)
    q = space.quality(space.grid())
    assert q.max() == 0.0 and q.min() < 0.0
    shares = []
    share = tuned.sync.share
    tuned.sync.share = lambda *a, **k: shares.append(1) or share(*a, **k)
    frames = []
    cams = seed_orbit(vol.radius, 3)
    for cam in cams:
        before = len(shares)
        frames.append(tuned.render(cam))
        assert len(shares) - before == 1  # one state per frame rendered
    assert all(f.measured > 0 and f.predicted > 0 for f in frames)
    # the whole wait counts: probe, choice and frame
    assert all(f.measured >= f.record.frame_seconds + f.probe_seconds + f.search_seconds
               for f in frames)
    assert tuned.overhead.frames == 3 and tuned.overhead.seconds > 0.0
    # a frame's sections are the prices its choice was made with (the first frame's: no
    # correction yet), not the next frame's
    assert frames[0].sections["frame"] == pytest.approx(frames[0].predicted, rel=1e-12)
    assert all(f.sections["frame"] > f.sections["render"] > 0 for f in frames)
    # quality, measured after the timed frames: the frame at its settings and at full quality
    before = len(shares)
    quality = tuned.quality_of(cams[0], frames[0].settings)
    assert len(shares) - before == 2 and tuned.overhead.frames == 3  # untimed, unlearned
    assert 0.0 < quality["ssim"] <= 1.0 and quality["psnr"] > 20.0
    same = tuned.quality_of(cams[0], BEST)
    assert same["psnr"] == math.inf and same["ssim"] == pytest.approx(1.0)
    # a still camera is not probed again (the probe is deterministic); another size is
    probes = []
    probe = tuned.probe
    tuned.probe = lambda *a: probes.append(a) or probe(*a)
    last = seed_orbit(vol.radius, 3)[-1]
    still = tuned.render(last)
    assert still.probe_seconds == 0.0 and probes == []
    tuned.resize(40, 40)
    tuned.render(last)
    assert len(probes) == 1


def test_group_ratio_fit_learns_each_volume_and_keeps_it_across_swaps(bonsai):
    """The group-ratio fit learns from every calibration and governed frame of the volume
    rendered, and the model prices with it; another volume starts a fit of its own (priced
    from the last frame's ratio until it has a frame), and the home volume swapped back in
    has its fit again. The ranks' correction learns from governed frames alike, and starts
    anew with a new calibration."""
    vol, tf = bonsai
    home = DistributedRenderer(vol, tf)
    tuned = TunedVolumeRenderer(home, 48, 48, 0.05)
    tuned.calibrate(volume_calibration_views(vol.radius, 3), frames=MIN_CALIBRATION_FRAMES)
    fit = tuned.group_fit
    assert fit.fitted.all() and tuned.model.group_fit is fit
    learned = copy.copy(fit)
    tuned.render(seed_orbit(vol.radius, 2)[1])
    ranks = fit.fitted.size
    def ratio(f):
        return f.table(np.ones((1, ranks)), 32, [32.0], np.ones(ranks), 32.0)
    assert not np.array_equal(ratio(fit), ratio(learned))  # the frame taught it
    correction = tuned.fit.correction
    assert tuned.model.correction is correction and not np.all(correction.factor == 1.0)
    other = DistributedRenderer(*load_everywhere("neghip"))
    tuned.swap_renderer(other)
    assert tuned.model.group_fit is tuned.group_fit is not fit
    assert not tuned.group_fit.fitted.any()
    assert np.all(tuned.model.correction.factor == 1.0)  # nothing learned of it yet
    tuned.render(seed_orbit(other.volume.radius, 2)[0])
    assert tuned.group_fit.fitted.all() and not np.all(tuned.model.correction.factor == 1.0)
    tuned.swap_renderer(home)
    assert tuned.model.group_fit is fit and tuned.model.correction is correction
    tuned.calibrate(volume_calibration_views(vol.radius, 3),
                    frames=MIN_CALIBRATION_FRAMES)  # a new fit
    assert np.all(tuned.model.correction.factor == 1.0)


def test_each_calibrated_volume_is_priced_by_its_own_render_models(bonsai):
    """Calibrated beside another volume, each volume's ranks get render models fitted on its
    own frames; a volume swapped in uncalibrated is priced by the models fitted on all."""
    vol, tf = bonsai
    home = DistributedRenderer(vol, tf)
    also = DistributedRenderer(*load_everywhere("neghip"))
    tuned = TunedVolumeRenderer(home, 48, 48, 0.05)
    tuned.calibrate(volume_calibration_views(vol.radius, 3), frames=MIN_CALIBRATION_FRAMES,
                    also=[(also, volume_calibration_views(also.volume.radius, 3))])
    fitted = MIN_CALIBRATION_FRAMES - 1
    assert len(tuned.calibration_samples) == 2 * fitted and len(tuned.pricing_samples) == fitted
    own = tuned.model.model.render
    assert own == tuned.fit.render and own != tuned.joint_model.render
    assert tuned.model.model.stage == tuned.joint_model.stage  # compositing: one model
    tuned.swap_renderer(also)
    assert tuned.model.model.render == tuned.fit.render not in (own, tuned.joint_model.render)
    assert tuned.pricing_samples == tuned.fit.samples
    tuned.swap_renderer(DistributedRenderer(*load_everywhere("marschner-lobb:24")))
    assert tuned.model.model.render == tuned.joint_model.render
    assert tuned.pricing_samples == tuned.calibration_samples
    tuned.swap_renderer(home)
    assert tuned.model.model.render == own


def test_a_swapped_in_volume_is_ranked_by_its_own_quality_losses(bonsai):
    """Once calibrated, a volume's first swap measures what its knobs cost in looks there and
    the search ranks by them; swapped out and back, each volume's are used again, unmeasured."""
    vol, tf = bonsai
    home = DistributedRenderer(vol, tf)
    tuned = TunedVolumeRenderer(home, 48, 48, 0.05)
    tuned.calibrate(volume_calibration_views(vol.radius, 3), frames=MIN_CALIBRATION_FRAMES)
    own = tuned.losses
    other = DistributedRenderer(*load_everywhere("neghip"))
    tuned.swap_renderer(other)
    theirs = tuned.losses
    assert other.frames_rendered > WARMUP_FRAMES and theirs is not own  # its sweeps
    assert not np.array_equal(theirs.joint, own.joint) or any(
        not np.array_equal(theirs.sweeps[k][1], own.sweeps[k][1]) for k in own.sweeps)

    def ranked_by(losses):
        space = tuned.loop.space
        return np.array_equal(space.quality(space.grid()),
                              volume_knob_space(losses).quality(space.grid()))

    assert ranked_by(theirs) and not ranked_by(own)
    rendered = other.frames_rendered
    tuned.swap_renderer(home)
    assert tuned.losses is own and ranked_by(own)
    tuned.swap_renderer(other)
    assert other.frames_rendered == rendered and tuned.losses is theirs and ranked_by(theirs)


def test_a_swapped_in_renderer_is_warmed_up_once(bonsai):
    """A renderer's first frames are slow: a swap renders its first few at the cheapest
    setting, untimed, and a renderer swapped back in (already warm) renders none."""
    vol, tf = bonsai
    home = DistributedRenderer(vol, tf)
    tuned = TunedVolumeRenderer(home, 32, 32, 0.05)
    other = DistributedRenderer(*load_everywhere("neghip"))
    tuned.swap_renderer(other)
    assert other.frames_rendered == WARMUP_FRAMES and home.frames_rendered == 0
    tuned.swap_renderer(home)
    tuned.swap_renderer(other)
    assert other.frames_rendered == WARMUP_FRAMES and home.frames_rendered == WARMUP_FRAMES


def test_distributed_embedding_example_runs_on_two_ranks():
    worker = str(Path(__file__).with_name("volume_embedding_worker.py"))
    repo = str(Path(__file__).resolve().parents[1])
    done = launch([worker], 2, timeout=300, env={"PYTHONPATH": repo})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [x for x in done.stdout.splitlines() if x.endswith(tuple("0123456789"))]
    assert len(lines) == 4 and all(" ms, step " in x for x in lines)  # rank 0 only


def test_priced_grid_follows_each_frames_workload(bonsai):
    """The candidate geometry is cached for the grid the tuner prices every frame; the
    workload is not: a new view's probe changes the prices of the same grid, and the prices
    equal those of a fresh copy of the grid."""
    vol, tf = bonsai
    part = kd_partition(vol.dims, 2, vol.spacing)
    grid = BlockGrid.for_volume(vol, tf)
    thresholds = np.array([0.95, 0.975, 1.0])
    render = tuple(RenderModel(2e-8, 1e-9, 1e-7, 1e-9, 1e-3) for _ in part.bricks)
    model = VolumeModel(ClusterFrameModel(render, StageModel(1e-4, 1e-10, 1e-9),
                                          GatherModel(1e-4, 1e-10)), 1e-9, 64, 64, thresholds)
    model.stages = [[StageWork(1, 1, 64 * 64 * 8.0, 64 * 64 / 2.0) for _ in part.bricks]]
    candidates = {"sampling_rate": np.array([0.5, 1.0, 2.0, 2.0]),
                  "image_scale": np.array([1.0, 0.5, 1.0, 0.75]),
                  "ert_threshold": np.array([1.0, 0.95, 0.975, 1.0])}
    near, far = seed_orbit(vol.radius, 1, distance=1.6)[0], seed_orbit(vol.radius, 1)[0]
    prices = []
    for cam in (near, far):
        model.workload = probe_workload(grid, cam, 64, 64, brick_boxes(part), thresholds)
        cached = model(candidates)
        np.testing.assert_allclose(cached, model({k: v.copy() for k, v in candidates.items()}))
        np.testing.assert_array_equal(cached, model.sections(candidates)["frame"])
        prices.append(cached)
    assert not np.allclose(prices[0], prices[1])


def test_priced_grid_follows_a_resize(bonsai):
    """The cached geometry belongs to one display size: after a resize the same grid is
    priced as a model built for the new size prices it (it was priced at the old size)."""
    vol, tf = bonsai
    part = kd_partition(vol.dims, 2, vol.spacing)
    grid = BlockGrid.for_volume(vol, tf)
    thresholds = np.array([0.95, 0.975, 1.0])
    render = tuple(RenderModel(2e-8, 1e-9, 1e-7, 1e-9, 1e-3) for _ in part.bricks)
    cluster = ClusterFrameModel(render, StageModel(1e-4, 1e-10, 1e-9), GatherModel(1e-4, 1e-10))
    workload = probe_workload(grid, seed_orbit(vol.radius, 1)[0], 64, 64, brick_boxes(part),
                              thresholds)
    candidates = volume_knob_space().grid()

    def model_at(width: int, height: int) -> VolumeModel:
        m = VolumeModel(cluster, 1e-9, width, height, thresholds)
        m.workload = workload
        m.stages = [[StageWork(1, 1, 64 * 64 * 8.0, 64 * 64 / 2.0) for _ in part.bricks]]
        return m

    model = model_at(64, 64)
    small = model(candidates)
    model.width, model.height = 128, 96
    np.testing.assert_array_equal(model(candidates), model_at(128, 96)(candidates))
    assert np.all(model(candidates) > small)


def test_block_code_keeps_empty_blocks_and_faint_opacity():
    """The one-byte block code: empty stays empty, a faint block keeps its opacity within a
    few per cent, a block sampled only for the visible voxel its far corner reads is not
    empty, and a block's code lets through what its opacity does."""
    values = np.zeros((16, 16, 16), np.float32)
    values[:4, :4, :4] = 1.0  # one block of value 1
    values[8:12, 8:12, 8:12] = 0.5  # one of 0.5, the rest 0
    alpha = np.zeros(256, np.float32)
    alpha[255], alpha[128] = 0.6, 0.004
    grid = BlockGrid.of(values, alpha, np.zeros(3), np.ones(3), block=4)
    assert grid.code[0, 0, 1] == 0  # its samples read only zeros
    assert grid.opacity[0, 0, 0] == pytest.approx(0.6, rel=0.01)
    assert grid.opacity[2, 2, 2] == pytest.approx(0.004, rel=0.05)
    assert grid.nonempty[1, 1, 1] and grid.opacity[1, 1, 1] == 0.0  # its corner reads 0.5
    passes = grid.transmittance(2.0)
    assert passes[0] == 1.0
    assert passes[grid.code[0, 0, 0]] == pytest.approx((1 - 0.6) ** 2, rel=0.02)


def test_probe_grid_skips_exactly_the_blocks_the_caster_skips(bonsai):
    vol, tf = bonsai
    grid = BlockGrid.for_volume(vol, tf)
    skipped = Raycaster(vol, tf).empty
    assert grid.code.shape == skipped.shape
    np.testing.assert_array_equal(grid.nonempty, skipped == 0)


def test_working_set_counts_each_bricks_nonempty_blocks(tmp_path):
    """Bytes of float voxels in each brick's non-empty blocks; the per-core cache from sysfs."""
    values = np.zeros((8, 8, 16), np.float32)
    values[:4, :4, :4] = 1.0  # one non-empty block in the left half, none in the right
    alpha = np.zeros(256, np.float32)
    alpha[255] = 0.5
    grid = BlockGrid.of(values, alpha, np.zeros(3), np.ones(3), block=4)
    boxes = np.array([[[0, 0, 0], [8, 8, 8]], [[8, 0, 0], [16, 8, 8]]], np.float64)
    assert grid.working_set_bytes(boxes).tolist() == [4**3 * 4, 0.0]
    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (2, "Unified", "1024K"),
                                                 (3, "Unified", "32768K")]):
        d = tmp_path / f"index{index}"
        d.mkdir()
        for name, text in (("level", level), ("type", kind), ("size", size)):
            (d / name).write_text(f"{text}\n")
    assert core_cache_bytes(tmp_path) == 1 << 20
    assert core_cache_bytes(tmp_path / "missing") == DEFAULT_CORE_CACHE


def test_counted_models_fit_the_casters_own_counts_as_groups_pay_them():
    """The model form fitted on the caster's counts (the probe-free reference of bench
    volume-tuned): samples are priced as the SIMD groups paid them, and a frame made by the
    form's own formula is priced back exactly, the view's slice and plane crossings and the
    probe's jumps over empty space included (the caster does not count those)."""
    truth = RenderModel(2e-8, 3e-9, 1e-7, 5e-9, 1e-4, 2e-8, 3e-9, per_sample_crossing=1e-8,
                        per_jump=4e-8, per_sample_plane=6e-9)
    rng = np.random.default_rng(1)
    samples = []
    for _ in range(24):
        side = int(rng.integers(64, 256))
        crossing, plane = rng.uniform(0.05, 0.95), rng.uniform(0.0, 1.4)
        jumps = rng.uniform(0.5, 12.0, (1, 2))  # per probe ray
        ranks = []
        for r in range(2):
            taken, skipped, rays = (int(v) for v in rng.integers(10**5, 10**7, 3))
            ratio = rng.uniform(1.2, 2.0)
            paid = round(taken * ratio)
            cpu = float(truth.predict(paid, skipped, rays, side * side, 0.0, crossing,
                                      jumps[0, r] * side * side, plane))
            ranks.append(RankTiming(r, r, cpu * 1.1, cpu, taken, skipped, rays, 0.0,
                                    cpu_seconds=cpu, group_samples=paid))
        record = SimpleNamespace(ranks=ranks, render_width=side, render_height=side)
        workload = SimpleNamespace(slice_crossing=crossing, plane_crossing=plane,
                                   thresholds=np.ones(1), jumps=jumps)
        samples.append(SimpleNamespace(record=record, streamed=np.zeros(2), workload=workload,
                                       settings=SimpleNamespace(ert_threshold=1.0)))
    models = counted_render_models(samples)
    assert len(models) == 2
    for r, m in enumerate(models):
        for s in samples:
            t = s.record.ranks[r]
            z, side = s.workload.slice_crossing, s.record.render_width
            assert float(m.predict(t.group_samples, t.skipped, t.rays, side**2, 0.0, z,
                                   s.workload.jumps[0, r] * side**2,
                                   s.workload.plane_crossing)
                         ) == pytest.approx(t.cpu_seconds, rel=1e-3)


def test_counted_models_need_calibration_frames():
    with pytest.raises(VolumeModelError, match="no calibration frames"):
        counted_render_models([])


def test_probe_counts_the_casters_jumps_over_empty_space():
    """A filled volume makes no jump; an empty one (every block's empty cube reaches the cap
    of 32 blocks) half a jump per ray across its 16 blocks of depth; a slab across the middle
    more (the cubes shrink towards it), about as many at any probe step: a jump is priced per
    ray, not per position passed over."""
    n = 64
    alpha = np.full(256, 1e-3, np.float32)  # faint: no ray terminates
    alpha[:2] = 0.0  # value 0 (and the lookup's one entry of margin) is empty
    part = kd_partition((n, n, n), 1)
    origin = np.asarray(part.origin, np.float64)
    cam = Camera((0.0, 0.0, 1000.0), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0),
                 2.0 * np.degrees(np.arctan(24.0 / 1000.0)))
    thresholds = np.array([0.95, 1.0])

    def jumps_per_ray(values: np.ndarray, step: float = 4.0) -> np.ndarray:
        grid = BlockGrid.of(values, alpha, origin, np.ones(3))
        w = WorkloadProbe(grid, brick_boxes(part), thresholds, step_vox=step)(cam, 64, 64)
        assert w.rays[0] == 1.0  # every probe ray enters the brick
        return w.jumps[:, 0]

    assert np.all(jumps_per_ray(np.ones((n, n, n), np.float32)) == 0.0)
    assert jumps_per_ray(np.zeros((n, n, n), np.float32)) == pytest.approx(0.5, abs=0.04)
    slab = np.zeros((n, n, n), np.float32)
    slab[n // 2 - 2: n // 2 + 2] = 1.0  # z slices (the array is [z, y, x])
    assert np.all(jumps_per_ray(slab) > 1.0)
    assert jumps_per_ray(slab, 2.0) == pytest.approx(jumps_per_ray(slab, 4.0), rel=0.15)


def test_probe_roughness_counts_each_jump_between_adjacent_rays():
    """A volume filled on its left half, seen head-on (every ray crosses the whole depth):
    each probe row has one jump from the full depth to nothing, so the mean change between
    adjacent rays is depth / (rays across − 1); filled everywhere, adjacent rays walk alike
    and the roughness is ~0."""
    n = 64
    alpha = np.full(256, 1e-3, np.float32)  # faint: no ray terminates
    alpha[:2] = 0.0  # value 0 (and the lookup's one entry of margin) is empty
    part = kd_partition((n, n, n), 1)  # a box centred on the origin
    origin = np.asarray(part.origin, np.float64)
    cam = Camera((0.0, 0.0, 1000.0), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0),
                 2.0 * np.degrees(np.arctan(24.0 / 1000.0)))
    half = np.zeros((n, n, n), np.float32)
    half[:, :, : n // 2] = 1.0
    grid = BlockGrid.of(half, alpha, origin, np.ones(3))
    w = probe_workload(grid, cam, 64, 64, brick_boxes(part), np.array([0.95, 1.0]))
    depth = n - 1.0
    assert w.neighbour_change[:, 0] == pytest.approx(depth / (w.probe_width - 1), rel=0.1)
    assert w.roughness[:, 0] == pytest.approx(w.neighbour_change[:, 0] / w.length[:, 0])
    full = BlockGrid.of(np.ones((n, n, n), np.float32), alpha, origin, np.ones(3))
    w = probe_workload(full, cam, 64, 64, brick_boxes(part), np.array([0.95, 1.0]))
    assert np.all(w.length[:, 0] > 0.9 * depth) and np.all(w.roughness < 0.02)
    # looking down z, the rays cross a slice per voxel and the image plane lies across the
    # slices; looking along x, the rays cross almost none and the image's right axis runs
    # along z
    assert w.slice_crossing == pytest.approx(1.0, abs=1e-3)
    assert w.plane_crossing == pytest.approx(0.0, abs=1e-6)
    side = Camera((1000.0, 0.0, 0.0), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), cam.fov_y)
    w = probe_workload(full, side, 64, 64, brick_boxes(part), np.array([0.95, 1.0]))
    assert w.slice_crossing < 0.02
    assert w.plane_crossing == pytest.approx(1.0, abs=1e-6)
    # in voxels: slices twice as far apart in the world are crossed half as fast
    tall = BlockGrid.of(np.ones((n, n, n), np.float32), alpha, origin, np.array([1., 1., 2.]))
    oblique = Camera((1000.0, 0.0, 1000.0), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), cam.fov_y)
    w = probe_workload(tall, oblique, 64, 64, brick_boxes(part), np.array([0.95, 1.0]))
    assert w.slice_crossing == pytest.approx(1 / np.sqrt(5), rel=0.05)
    assert w.plane_crossing == pytest.approx(1 / np.sqrt(5), rel=1e-5)  # right (1, 0, -1/2)
