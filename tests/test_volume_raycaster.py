"""OpenCL ray caster: against the CPU reference, seamless bricks, empty-space skipping."""

from __future__ import annotations

import numpy as np
import pytest

from governed.volume.knobs import RATES, knob_steps
from raytracer.camera import Camera
from raytracer.device.launches import Launch
from raytracer.mesh.phases import simd_lanes
from raytracer.volume import (
    Brick,
    Raycaster,
    TransferFunction,
    Volume,
    VolumeError,
    composite_over,
    default_for,
    kd_partition,
    load_volume,
    raycaster,
    render_reference,
)
from raytracer.volume.ray_counts import count_totals
from raytracer.volume.raycaster import (
    LUT_CACHE_STEPS,
    OPAQUE_TRANSMITTANCE,
    cell_words,
    voxel_options,
)

W, H = 48, 40


def _views(volume) -> list[Camera]:
    r = volume.radius
    return [
        Camera((0.0, 0.0, 2.5 * r), (0.0, 0.0, 0.0)),                 # axis-aligned, +z
        Camera((-2.5 * r, 0.0, 0.0), (0.0, 0.0, 0.0)),                # axis-aligned, -x
        Camera((1.6 * r, 1.3 * r, 1.4 * r), (0.0, 0.0, 0.0)),         # diagonal
        Camera((0.1 * r, -0.2 * r, 0.05 * r), (r, 0.4 * r, -r), fov_y=70.0),  # eye inside
    ]


@pytest.fixture(scope="module")
def ml():
    vol = load_volume("marschner-lobb:24")
    return vol, default_for("marschner-lobb")


@pytest.fixture(scope="module")
def neghip():
    vol = load_volume("neghip", spacing=(1.0, 1.25, 0.9))  # anisotropic on purpose
    return vol, default_for("neghip")


@pytest.mark.parametrize("case", ["ml", "neghip"])
def test_opencl_matches_cpu_reference(request, case):
    vol, tf = request.getfixturevalue(case)
    rc = Raycaster(vol, tf)
    worst = 0.0
    for cam in _views(vol):
        for step, ert in ((1.0, 1.0), (0.6, 1.0), (1.3, 0.9)):
            img = rc.render(cam, W, H, step, ert).rgba
            ref = render_reference(vol, tf, cam, W, H, step, ert)
            assert img.shape == (H, W, 4) and img.dtype == np.float32
            assert ref[..., 3].max() > 0.2  # the view shows something
            err = float(np.abs(img - ref).max())
            worst = max(worst, err)
            assert err <= 1e-3, (case, cam, step, ert, err)
    print(f"{case}: max |OpenCL - reference| = {worst:.2e}")


def test_seamless_bricks_equal_the_single_brick_image(neghip):
    vol, tf = neghip
    cams = _views(vol)
    whole = Raycaster(vol, tf)
    singles = {(i, ert): whole.render(c, W, H, 0.8, ert).rgba
               for i, c in enumerate(cams) for ert in (1.0, 0.9)}
    worst = {1.0: 0.0, 0.9: 0.0}
    for parts in range(2, 9):
        part = kd_partition(vol.dims, parts, vol.spacing)
        casters = [Raycaster(vol, tf, b) for b in part.bricks]
        for i, cam in enumerate(cams):
            order = part.visibility_order(cam.eye)
            for ert in (1.0, 0.9):
                images = [casters[b].render(cam, W, H, 0.8, ert).rgba for b in order]
                diff = composite_over(images) - singles[(i, ert)]
                # ERT bound: a brick stops on its own opacity (at 1.0: once opaque), so the
                # composite keeps every sample the single image keeps plus samples behind
                # accumulated opacity >= threshold: 0 <= composite - single <= 1 - threshold.
                bound = 1.0 - min(ert, 1.0 - OPAQUE_TRANSMITTANCE)
                worst[ert] = max(worst[ert], float(np.abs(diff).max()))
                assert diff.min() >= -1e-5 and diff.max() <= bound + 1e-5, (parts, i, ert)
    print(f"seams: max |composite - single| ERT 1.0 {worst[1.0]:.2e}, ERT 0.9 {worst[0.9]:.2e}")


def test_brick_images_are_zero_where_rays_miss_the_brick(neghip):
    vol, tf = neghip
    part = kd_partition(vol.dims, 2, vol.spacing)
    cam = Camera((0.0, 0.0, 3 * vol.radius), (0.0, 0.0, 0.0))
    img = Raycaster(vol, tf, part.bricks[0]).render(cam, W, H)
    assert img.brick_index == 0 and img.rays > 0
    assert np.all(img.rgba[:, -W // 4:] == 0)  # the split is along x: the right side misses


def test_empty_space_skipping_changes_nothing_and_skips(neghip):
    vol, tf = neghip
    rc = Raycaster(vol, tf)
    assert 0 < rc.empty.mean() < 1
    for cam in _views(vol):
        on = rc.render(cam, W, H, 0.7, 1.0, skip_empty=True)
        off = rc.render(cam, W, H, 0.7, 1.0, skip_empty=False)
        np.testing.assert_array_equal(on.rgba, off.rgba)
        assert off.skipped == 0 and on.skipped > 0 and on.samples < off.samples
    fine_on = rc.render(_views(vol)[2], W, H, 0.05, 1.0, skip_empty=True)  # many samples a cell
    fine_off = rc.render(_views(vol)[2], W, H, 0.05, 1.0, skip_empty=False)
    np.testing.assert_array_equal(fine_on.rgba, fine_off.rgba)
    assert fine_on.skipped > 10 * on.skipped
    # a transfer function that shows every value leaves nothing to skip
    rc.set_transfer_function(TransferFunction([(0, 1, 1, 1)], [(0, 0.01), (1, 0.5)]))
    assert rc.empty.sum() == 0
    assert rc.render(_views(vol)[0], W, H).skipped == 0


def test_colour_tables_kept_per_step_render_as_fresh_ones(neghip, monkeypatch):
    vol, tf = neghip
    cam = _views(vol)[2]
    rc = Raycaster(vol, tf)
    images = [rc.render(cam, W, H, step, 1.0).rgba for step in (0.7, 1.3, 0.7)]
    np.testing.assert_array_equal(images[0], images[2])  # the kept 0.7 table
    np.testing.assert_array_equal(images[1], Raycaster(vol, tf).render(cam, W, H, 1.3).rgba)
    # another transfer function: no table of the old one is used again
    other = TransferFunction([(0, 1, 1, 1)], [(0, 0.01), (1, 0.5)])
    rc.set_transfer_function(other)
    np.testing.assert_array_equal(rc.render(cam, W, H, 0.7, 1.0).rgba,
                                  Raycaster(vol, other).render(cam, W, H, 0.7).rgba)
    assert rc.kept_table_steps == (1.3, 0.7)  # rebuilt for the new function
    # tables made before the frames: every step the tuner can choose fits
    rc.prepare_steps(knob_steps())
    assert len(knob_steps()) == RATES[2] <= LUT_CACHE_STEPS
    assert set(rc.kept_table_steps) >= set(knob_steps())
    # at most LUT_CACHE_STEPS tables, the least recently used dropped
    monkeypatch.setattr(raycaster, "LUT_CACHE_STEPS", 2)
    for step in (0.7, 1.1, 0.7, 1.5):
        rc.render(cam, 8, 8, step, 1.0)
    assert rc.kept_table_steps == (0.7, 1.5)


def test_early_termination_saves_samples_and_step_keeps_the_look(neghip):
    vol, tf = neghip
    rc = Raycaster(vol, TransferFunction([(0, 1, 1, 1)], [(0, 0), (0.1, 0.6), (1, 0.9)]))
    cam = _views(vol)[2]
    full = rc.render(cam, W, H, 1.0, 1.0)
    ert = rc.render(cam, W, H, 1.0, 0.95)
    assert ert.samples < 0.85 * full.samples  # (at 1.0 rays stop too, but only once opaque)
    assert np.abs(ert.rgba - full.rgba).max() <= 0.05 + 1e-6
    fine = rc.render(cam, W, H, 0.5, 1.0)  # opacity correction: same image, twice the samples
    assert fine.samples > 1.8 * full.samples
    assert np.abs(fine.rgba[..., 3] - full.rgba[..., 3]).mean() < 0.02


def test_bad_knobs_and_bricks_are_errors(ml):
    vol, tf = ml
    rc = Raycaster(vol, tf)
    cam = _views(vol)[0]
    for kwargs, msg in (({"step": 0.0}, "sample step"), ({"ert_threshold": 0.0}, "threshold"),
                        ({"ert_threshold": 1.5}, "threshold"), ({"width": 0}, "image size")):
        args = {"camera": cam, "width": W, "height": H, **kwargs}
        with pytest.raises(VolumeError, match=msg):
            rc.render(**args)
    with pytest.raises(VolumeError, match="does not fit"):
        Raycaster(vol, tf, Brick(0, (0, 0, 0), (24, 10, 10)))


def test_the_measured_launch_renders_the_default_image(neghip):
    """Whatever launch this device chose for the caster (device/launches.py), the image and
    counts are those of the plain 8x8 launch, bit for bit."""
    vol, tf = neghip
    chosen = Raycaster(vol, tf)
    assert chosen.launch == raycaster.device_launch() and chosen.group == chosen.launch.group
    plain = Raycaster(vol, tf, launch=Launch())
    for cam in _views(vol)[:2]:
        a = chosen.render(cam, 50, 38, 0.5, 0.95)  # sizes not multiples of any group
        b = plain.render(cam, 50, 38, 0.5, 0.95)
        assert np.array_equal(a.rgba, b.rgba)
        assert (a.samples, a.skipped, a.rays) == (b.samples, b.skipped, b.rays)


@pytest.mark.parametrize("packet", [(4, 4), (16, 1), (2, 4)])
def test_packets_render_the_scalar_kernels_image_and_counts_bit_for_bit(neghip, packet):
    """raycast_packet.cl casts each ray as raycast.cl does, whatever the packet's shape: byte
    cells and float voxels, bricks, skipping on and off, sizes that cut packets and groups."""
    vol, tf = neghip
    halved = Volume(vol.data * np.float32(0.5), vol.spacing)  # float voxels, same values
    frames = ((50, 38, 0.5, 0.95, True), (33, 17, 1.3, 1.0, False), (W, H, 0.8, 0.9, True))
    for volume in (vol, halved):
        for brick in [None, *kd_partition(volume.dims, 3, volume.spacing).bricks]:
            scalar = Raycaster(volume, tf, brick, launch=Launch())
            packed = Raycaster(volume, tf, brick, launch=Launch(packet=packet))
            assert packed.lanes == (packet[1], packet[0])
            for cam in _views(vol):
                for w, h, step, ert, skip in frames:
                    a = scalar.render(cam, w, h, step, ert, skip)
                    b = packed.render(cam, w, h, step, ert, skip)
                    assert np.array_equal(a.rgba, b.rgba), (volume.name, brick, cam, w, h)
                    assert (a.samples, a.skipped, a.rays) == (b.samples, b.skipped, b.rays)


def test_group_samples_are_each_simd_groups_slowest_lane():
    """A group of lanes in lockstep pays its slowest lane's samples on every lane."""
    taken = np.array([[1, 5, 2, 2, 7],
                      [3, 0, 2, 2, 0]], np.uint32)
    counts = np.stack([taken, np.array([[0, 0, 0, 0, 0], [0, 4, 0, 0, 0]], np.uint32)], -1)
    one = count_totals(counts, (1, 1))  # one lane: what was taken
    assert one == (taken.sum(), 4, 9, taken.sum())  # 9 pixels took or skipped a sample
    # 1x2 groups (the last padded): (5 + 2 + 7 + 3 + 2 + 0) * 2
    assert count_totals(counts, (1, 2)).group_samples == 38
    assert count_totals(counts, (2, 2)).group_samples == (5 + 2 + 7) * 4
    assert simd_lanes(16, (16, 4)) == (1, 16)  # lanes along x first
    assert simd_lanes(1, (8, 8)) == (1, 1)  # one work-item at a time
    assert simd_lanes(32, (8, 8)) == (4, 8)
    assert simd_lanes(128, (8, 8)) == (8, 8)  # wider than a group: the group


def test_a_frame_counts_its_group_samples(neghip, monkeypatch):
    vol, tf = neghip
    rc = Raycaster(vol, tf)
    seen = []

    def kept(counts, lanes):  # the frame's count image, kept for the check below
        seen.append(counts.copy())
        return count_totals(counts, lanes)

    monkeypatch.setattr(raycaster, "count_totals", kept)
    out = rc.render(_views(vol)[0], W, H, 0.5, 0.95)
    assert out.group_samples >= out.samples > 0 and out.rays > 0
    # the totals of the frame's own count image, by NumPy reductions
    counts = seen[0].astype(np.int64)
    rows, cols = rc.lanes
    padded = np.zeros((-(-H // rows) * rows, -(-W // cols) * cols), np.int64)
    padded[:H, :W] = counts[..., 0]
    groups = padded.reshape(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)
    assert (out.samples, out.skipped, out.rays, out.group_samples) == (
        counts[..., 0].sum(), counts[..., 1].sum(), np.count_nonzero(counts.sum(-1)),
        groups.max(axis=(1, 3)).sum() * rows * cols)


def test_cell_words_hold_each_cells_2x2_corners():
    levels = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)  # [z, y, x]
    words = cell_words(levels)
    assert words.dtype == np.uint32 and words.shape == levels.shape
    byte = [(words >> (8 * i)) & 0xFF for i in range(4)]
    np.testing.assert_array_equal(byte[0], levels)
    np.testing.assert_array_equal(byte[1][:, :, :-1], levels[:, :, 1:])
    np.testing.assert_array_equal(byte[2][:, :-1, :], levels[:, 1:, :])
    np.testing.assert_array_equal(byte[3][:, :-1, :-1], levels[:, 1:, 1:])
    assert not byte[1][:, :, -1].any() and not byte[2][:, -1, :].any()


def test_byte_cells_render_the_float_voxels_image_bit_for_bit(neghip):
    """neghip is 8-bit: byte cells. Halved, its values are not whole: float voxels, with the
    same normalized values (halving both the offsets and the range is exact)."""
    vol, tf = neghip
    halved = Volume(vol.data * np.float32(0.5), vol.spacing)
    np.testing.assert_array_equal(halved.normalized, vol.normalized)
    cells, floats = Raycaster(vol, tf), Raycaster(halved, tf)
    assert (cells.voxels, floats.voxels) == ("bytes", "float")
    part = kd_partition(vol.dims, 3, vol.spacing)
    bricks = [(Raycaster(vol, tf, b), Raycaster(halved, tf, b)) for b in part.bricks]
    for cam in _views(vol):
        for a, b in [(cells, floats), *bricks]:
            x, y = a.render(cam, W, H, 0.7, 0.95), b.render(cam, W, H, 0.7, 0.95)
            np.testing.assert_array_equal(x.rgba, y.rgba)
            assert (x.samples, x.skipped, x.rays) == (y.samples, y.skipped, y.rays)


def test_voxel_options_pick_cells_and_a_32_bit_index_while_it_reaches():
    assert voxel_options(True, 256**3) == ("-DBYTE_CELLS", "-DVOXEL_INDEX=uint")
    assert voxel_options(False, 2**32 - 1) == ("-DVOXEL_INDEX=uint",)
    assert voxel_options(False, 2**32) == ("-DVOXEL_INDEX=ulong",)


def test_threshold_one_stops_a_ray_once_opaque(neghip):
    """At threshold 1 a ray stops where what it lets through falls to OPAQUE_TRANSMITTANCE,
    at every step (not where float rounding happens to make its opacity exactly 1)."""
    vol, tf = neghip
    rc = Raycaster(vol, tf)
    for cam in _views(vol)[:3]:
        for step in (0.5, 2.0):
            at_one = rc.render(cam, W, H, step, 1.0)
            at_opaque = rc.render(cam, W, H, step, 1.0 - OPAQUE_TRANSMITTANCE)
            assert at_one.samples == at_opaque.samples, (cam, step)
            assert np.array_equal(at_one.rgba, at_opaque.rgba)
            assert at_one.rgba[..., 3].max() >= 1.0 - OPAQUE_TRANSMITTANCE  # some ray stopped


def test_a_smaller_frame_reuses_the_bigger_buffers_and_draws_the_same(neghip):
    """Output buffers only grow (a fresh buffer's page faults slowed the next frame's kernel by
    16 %); a smaller frame drawn into them is the frame a new caster draws."""
    vol, tf = neghip
    cam = _views(vol)[2]
    rc = Raycaster(vol, tf)
    for w, h in ((W, H), (W // 2, H // 2), (W, H), (W + 8, H)):
        img = rc.render(cam, w, h, 0.8, 0.95)
        fresh = Raycaster(vol, tf).render(cam, w, h, 0.8, 0.95)
        assert img.rgba.shape == (h, w, 4)
        assert np.array_equal(img.rgba, fresh.rgba)
        assert (img.samples, img.skipped, img.rays, img.group_samples) == (
            fresh.samples, fresh.skipped, fresh.rays, fresh.group_samples)


@pytest.mark.parametrize("background", [(0.0, 0.0, 0.0), (0.2, 0.5, 1.0)])
def test_display_conversion_is_the_over_formula_byte_for_byte(background):
    """to_rgb8 (compiled, one pass) gives the bytes of the plain formula: the image over an
    opaque background, clamped to [0, 1], rounded; values outside [0, 1] included."""
    from raytracer.volume.blend import to_rgb8

    rng = np.random.default_rng(3)
    rgba = (rng.random((37, 53, 4), dtype=np.float32) * 1.4 - 0.2).astype(np.float32)
    bg = np.asarray(background, np.float32)
    expected = (np.clip(rgba[..., :3] + (1 - rgba[..., 3:4]) * bg, 0, 1) * 255 + 0.5
                ).astype(np.uint8)
    got = to_rgb8(rgba, background)
    assert got.shape == (37, 53, 3) and got.dtype == np.uint8
    assert np.array_equal(got, expected)
    with pytest.raises(ValueError, match="RGBA"):
        to_rgb8(rgba[..., :3])
