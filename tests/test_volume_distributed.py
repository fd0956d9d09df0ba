"""The distributed frame loop (raytracer/volume/distributed.py): the composited image of
1..8 ranks equals the single-process image for every compositing algorithm and for
axis-aligned and diagonal views; bad input is one error on every rank; frame settings,
the seed-000 camera path and the upscale are checked in-process."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from raytracer.mpi.faults import AgreedError
from raytracer.mpi.launch import launch, mpiexec_path
from raytracer.volume.distributed import (
    DistributedFrameRecord,
    FrameSettings,
    RankTiming,
    load_everywhere,
    seed_orbit,
)
from raytracer.volume.upscale import upscale

WORKER = str(Path(__file__).with_name("mpi_volume_worker.py"))
REPO = Path(__file__).resolve().parents[1]
needs_mpiexec = pytest.mark.skipif(
    mpiexec_path() is None, reason="mpiexec not installed (pip install mpich)"
)


def test_frame_settings():
    s = FrameSettings(step=0.5, image_scale=0.5, ert_threshold=0.95)
    assert s.render_size(640, 360) == (320, 180)
    assert FrameSettings(image_scale=0.001).render_size(100, 100) == (1, 1)
    for bad in ({"step": 0}, {"step": math.nan}, {"image_scale": 1.5}, {"ert_threshold": 0}):
        with pytest.raises(ValueError):
            FrameSettings(**bad)


def test_a_rank_that_did_not_run_shows_as_wall_time_beyond_its_cpu_time():
    def record(*ranks: tuple[float, float, str]) -> DistributedFrameRecord:
        timings = [RankTiming(i, i, wall, wall, 1, 0, 1, 0.0, cpu_seconds=cpu, work_clock=clock)
                   for i, (wall, cpu, clock) in enumerate(ranks)]
        return DistributedFrameRecord(0, (0.0, 0.0, 1.0), FrameSettings(), "radix-k", 8, 8, 8,
                                      8, [0, 1], 0.0, 0.0, timings)

    stalled = record((0.010, 0.0099, "cpu"), (0.017, 0.009, "cpu"))
    assert stalled.descheduled_seconds == pytest.approx(0.008) and stalled.descheduled
    ran = record((0.010, 0.0101, "cpu"), (0.009, 0.0091, "cpu"))
    assert ran.descheduled_seconds == 0.0 and not ran.descheduled
    # on a GPU the host's CPU seconds only launched the kernel
    assert record((0.010, 0.001, "kernel")).descheduled_seconds == 0.0


def test_seed_orbit_is_two_turns_in_the_xz_plane():
    cams = seed_orbit(10.0)
    assert len(cams) == 72
    eyes = np.array([c.eye for c in cams])
    assert np.allclose(eyes[:, 1], 0.0)
    assert np.allclose(np.hypot(eyes[:, 0], eyes[:, 2]), 28.0)
    assert np.allclose(eyes[0], eyes[36]) and not np.allclose(eyes[0], eyes[18])


def test_upscale():
    img = np.random.default_rng(0).random((4, 6, 4), dtype=np.float32)
    assert upscale(img, 6, 4) is img
    big = upscale(img, 12, 8)
    assert big.shape == (8, 12, 4) and big.dtype == np.float32
    assert big.min() >= img.min() and big.max() <= img.max()
    flat = upscale(np.full((3, 5, 4), 0.25, np.float32), 7, 11)
    assert np.allclose(flat, 0.25)
    # bilinear with pixel centres aligned and edges clamped, against float64 arithmetic
    small = np.random.default_rng(1).random((5, 7, 4), dtype=np.float32)
    out = upscale(small, 16, 9)

    def taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        return np.floor(x).astype(int), np.minimum(np.floor(x).astype(int) + 1, n_in - 1), \
            x - np.floor(x)

    (ya, yb, fy), (xa, xb, fx) = taps(5, 9), taps(7, 16)
    s = small.astype(np.float64)
    rows = s[ya] * (1 - fy)[:, None, None] + s[yb] * fy[:, None, None]
    want = rows[:, xa] * (1 - fx)[None, :, None] + rows[:, xb] * fx[None, :, None]
    np.testing.assert_allclose(out, want, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="RGBA"):
        upscale(small[..., :3], 16, 9)


def test_bad_volume_in_one_process():
    with pytest.raises(AgreedError, match="nosuch"):
        load_everywhere("nosuch")


def _run(args: list[str], ranks: int):
    return launch([WORKER, *args], ranks, timeout=120, cwd=REPO,
                  env={"PYTHONPATH": str(REPO)})


@needs_mpiexec
def test_distributed_equals_single_process():
    """1, 2, 3, 4, 8 ranks (sub-communicators of one 8-rank job, so PoCL starts once per
    process), every algorithm, axis-aligned and diagonal views."""
    done = _run(["equal-all", "marschner-lobb:24", "48", "48", "1,2,3,4,8"], 8)
    assert done.returncode == 0, done.stdout + done.stderr
    for ranks in (1, 2, 3, 4, 8):
        assert re.search(rf"OK ranks={ranks} frames=15 max=", done.stdout), done.stdout


@needs_mpiexec
def test_distributed_in_comm_world():
    done = _run(["equal", "marschner-lobb:24", "48", "48"], 3)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"OK ranks=3 frames=15 max=", done.stdout), done.stdout


@needs_mpiexec
def test_bad_volume_is_one_error_on_every_rank():
    done = _run(["bad", "nosuch-volume"], 3)
    assert done.returncode == 0, done.stderr
    said = sorted(re.findall(r"rank (\d) raised: (.+?\(rank \d\))", done.stdout))
    assert [r for r, _ in said] == ["0", "1", "2"], done.stdout
    assert len({m for _, m in said}) == 1 and "nosuch-volume" in said[0][1]
    assert said[0][1].endswith("(rank 1)")
