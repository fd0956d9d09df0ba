"""Sort-last compositing and the never-hang MPI runtime (raytracer/volume/compositing/,
raytracer/volume/span_blend.py, raytracer/mpi/).

Schedules are checked serially for many rank counts; the MPI runs (``mpiexec -n K``,
oversubscribed on this 2-core machine) check every pixel IceT-style for 1..8 ranks, every
algorithm and shuffled visibility orders, and that a killed, raising or stuck rank ends the
whole job within seconds with a message naming the rank or the phase.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from raytracer.mpi import watchdog as mpi_watchdog
from raytracer.mpi.faults import ABORT_WATCHDOG, AgreedError, agree, world
from raytracer.mpi.launch import launch, launch_command, mpiexec_path
from raytracer.mpi.pinning import NodeShare, share_node
from raytracer.mpi.shared_memory import remove_orphaned_segments
from raytracer.volume import compositing, span_blend
from raytracer.volume.compositing import ALGORITHMS, composite_serial, factor_rounds, schedule

WORKER = str(Path(__file__).with_name("mpi_compositing_worker.py"))
VARIANTS = 4  # the worker's transport cases (mpi_compositing_worker.VARIANTS)
REPO = Path(__file__).resolve().parents[1]
needs_mpiexec = pytest.mark.skipif(
    mpiexec_path() is None, reason="mpiexec not installed (pip install mpich)"
)


def _layers(ranks: int, shape: tuple[int, int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(ranks):
        alpha = rng.random((*shape, 1), dtype=np.float32) * np.float32(0.9)
        color = rng.random((*shape, 3), dtype=np.float32) * alpha
        out.append(np.concatenate([color, alpha], axis=-1))
    return out


# ------------------------------------------------------------------ serial, no MPI


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_schedules_blend_in_any_visibility_order(algorithm):
    rng = np.random.default_rng(1)
    for ranks in range(1, 17):
        layers = _layers(ranks, (5, 7), ranks)
        for order in (list(range(ranks)), [int(r) for r in rng.permutation(ranks)]):
            reference = span_blend.over_serial([layers[r] for r in order])
            out = composite_serial(layers, order, algorithm)
            assert np.abs(out - reference).max() <= 1e-6, (algorithm, ranks, order)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_final_pieces_tile_the_image(algorithm):
    for ranks in range(1, 17):
        for npix in (ranks, 35, 1000):
            spans = sorted(s for s in compositing.final_spans(algorithm, ranks, npix) if s[1] > 0)
            assert spans[0][0] == 0 and spans[-1][1] == npix
            assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_stage_counts_and_partners():
    assert factor_rounds(8) == [8] and factor_rounds(1) == []
    assert factor_rounds(12) == [6, 2] and factor_rounds(7) == [7]
    assert sorted(factor_rounds(64)) == [8, 8]
    for ranks in range(2, 17):
        floor_log2 = ranks.bit_length() - 1
        assert len(schedule("2-3-swap", ranks, 4096)) == floor_log2
        bswap = schedule("binary-swap", ranks, 4096)
        assert len(bswap) == floor_log2 + (ranks & (ranks - 1) != 0)
        spans = ((0, 4096),) * ranks
        for stage in schedule("2-3-swap", ranks, 4096):
            for me in range(ranks):
                plan = compositing.plan_stage(stage, spans, me)
                if plan:
                    partners = {s for _, s, _ in plan.recvs} | {d for d, _ in plan.sends}
                    assert len(partners) <= 5
            spans = stage.spans


def test_bad_calls_fail_clearly():
    with pytest.raises(ValueError, match="unknown compositing algorithm"):
        schedule("direct-send", 4, 100)
    with pytest.raises(ValueError, match="permutation"):
        composite_serial(_layers(3, (2, 2), 0), [0, 1, 1], "radix-k")
    with pytest.raises(ValueError, match="float32"):
        composite_serial([np.zeros((2, 2, 3), np.float32)], [0], "radix-k")
    with pytest.raises(ValueError, match="unknown compositing transport"):
        compositing.composite(np.zeros((2, 2, 4), np.float32), [0], transport="pipes")


def test_numba_and_numpy_blends_are_bit_identical():
    rng = np.random.default_rng(2)
    n = span_blend.NUMBA_MIN_PIXELS
    front, back = (rng.random(4 * n, dtype=np.float32) for _ in range(2))
    over_jit, under_jit = span_blend.kernels()
    a, b = back.copy(), back.copy()
    over_jit(front, a)
    span_blend.numpy_blend(front, b, b)
    assert np.array_equal(a, b)
    a, b = front.copy(), front.copy()
    under_jit(a, back)
    span_blend.numpy_blend(b, back, b)
    assert np.array_equal(a, b)


def test_one_process_world_and_agree():
    comm = world()
    assert comm.Get_size() == 1
    agree(True, "fine")
    with pytest.raises(AgreedError, match="bad volume"):
        agree(False, "bad volume")
    env: dict[str, str] = {}
    assert share_node(cores=6, environ=env) == NodeShare(6, 1, 6)
    assert env["POCL_MAX_PTHREAD_COUNT"] == env["AUTOTUNE_COMPUTE_UNITS"] == "6"
    with pytest.raises(ValueError, match="rank count"):
        launch_command(["x"], 0)
    with pytest.raises(ValueError, match="module name"):
        launch_command([], 2)


def test_one_process_composite_returns_the_image():
    image = _layers(1, (3, 4), 5)[0]
    expected = image.copy()
    result = compositing.composite(image, [0], "2-3-swap")
    assert result.image is not None and np.array_equal(result.image, expected)
    assert result.stages == [] and result.gather.bytes_sent == 0


# ------------------------------------------------------------------------- MPI runs


def _run(args: list[str], ranks: int, timeout: float = 60):
    return launch([WORKER, *args], ranks, timeout=timeout, cwd=REPO,
                  env={"PYTHONPATH": str(REPO)})


@needs_mpiexec
def test_icet_style_every_pixel():
    """1..8 ranks (sub-communicators of one 8-rank job), every algorithm, three orders."""
    done = _run(["pattern-all", "9", "7", "3"], 8)
    assert done.returncode == 0, done.stdout + done.stderr
    for ranks in range(1, 9):
        checked = 3 * len(ALGORITHMS) * VARIANTS
        assert f"OK ranks={ranks} checked={checked}" in done.stdout, done.stdout


@needs_mpiexec
def test_icet_style_in_comm_world():
    """Five ranks as a whole job (COMM_WORLD itself, not a sub-communicator)."""
    done = _run(["pattern", "9", "7", "5"], 5)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"OK ranks=5 checked={3 * len(ALGORITHMS) * VARIANTS}" in done.stdout


def _fault(mode: str, transport: str) -> tuple[object, float]:
    done = _run([mode, transport], 4, timeout=60)
    end = time.time()
    match = re.search(r"FAULT AT ([0-9.]+)", done.stdout)
    assert match, done.stdout + done.stderr
    return done, end - float(match[1])


@needs_mpiexec
@pytest.mark.parametrize("transport", ["messages", "shared"])
def test_killed_rank_ends_the_job_and_is_named(transport):
    done, after = _fault("kill", transport)
    assert done.returncode != 0
    assert after < 5.0
    named = re.findall(r"^rank (\d+) failed: .*killed by SIGKILL", done.stderr, re.MULTILINE)
    assert named == ["1"], done.stdout + done.stderr  # the killed rank, not those hydra killed


@needs_mpiexec
@pytest.mark.parametrize("transport", ["messages", "shared"])
def test_raising_rank_ends_the_job_and_is_named(transport):
    done, after = _fault("raise", transport)
    assert done.returncode != 0
    assert after < 5.0
    assert "rank 2 failed: RuntimeError: injected blend fault" in done.stderr


@needs_mpiexec
def test_an_aborting_ranks_message_reaches_the_caller_even_if_stderr_loses_it():
    """Hydra's proxies may drop a dying rank's last stderr lines (seen on a loaded machine);
    the rank also sends its message to the launcher, which adds it where it is missing."""
    done = _run(["muted-abort"], 2)
    assert done.returncode != 0
    assert "rank 1 failed: a message stderr lost" in done.stderr, done.stdout + done.stderr


@needs_mpiexec
@pytest.mark.parametrize("transport", ["messages", "shared"])
def test_watchdog_names_the_phase(transport):
    done, after = _fault("hang", transport)
    assert done.returncode == ABORT_WATCHDOG
    assert after < 5.0
    assert "phase 'compositing' exceeded its 1 s timeout" in done.stderr


class _OneRank:
    def Get_rank(self) -> int:  # noqa: N802 (MPI's name)
        return 0


def test_watchdog_wakes_only_for_an_earlier_deadline_and_still_fires(monkeypatch):
    """Phases due after the deadline the watchdog sleeps until do not wake it (a frame's
    wake-ups cost 0.1-0.2 ms), ended phases never fire, and a short phase entered while it
    sleeps for a long one's deadline still ends the job in time."""
    fired = []

    class Aborted(Exception):
        pass

    def abort(comm, code, message):
        fired.append((code, message))
        raise Aborted  # a real abort never returns; this ends the watchdog's thread

    monkeypatch.setattr(mpi_watchdog, "abort", abort)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)
    dog = mpi_watchdog.Watchdog(_OneRank())
    with dog.phase("render", 60.0):
        time.sleep(0.05)  # the thread now sleeps until this phase's deadline
    wakes = []
    notify = dog._cond.notify
    dog._cond.notify = lambda *a: wakes.append(a) or notify(*a)
    for name in ("render", "compositing", "gather"):
        with dog.phase(name, 60.0):
            pass
    assert wakes == []
    with dog.phase("quick", 0.05):
        pass
    started = time.monotonic()
    with dog.phase("stuck", 0.2):
        while not fired and time.monotonic() - started < 5.0:
            time.sleep(0.01)
    assert len(wakes) == 2  # the two phases due before 60 s
    assert fired == [(ABORT_WATCHDOG,
                      "rank 0: phase 'stuck' exceeded its 0.2 s timeout (watchdog: a rank "
                      "is stuck, late or gone); aborting the job")]
    assert 0.2 <= time.monotonic() - started < 2.0


@needs_mpiexec
def test_agree_raises_the_same_error_on_every_rank():
    done = _run(["agree"], 4)
    assert done.returncode == 0, done.stderr
    expected = "volume.raw: 1000 bytes, expected 4096 for 16x16x16 uint8 (rank 2)"
    said = sorted(re.findall(r"rank (\d) raised: (.+?\(rank \d\))", done.stdout))
    assert said == [(str(r), expected) for r in range(4)], done.stdout


@needs_mpiexec
def test_ranks_share_the_cores():
    done = _run(["threads", "8"], 3)
    assert done.returncode == 0, done.stderr
    assert sorted(re.findall(r"threads (\d+) env (\d+)", done.stdout)) == [("2", "2")] * 3


@needs_mpiexec
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to pin 2 ranks")
def test_ranks_launched_unpinned_are_pinned_to_their_own_cores():
    cores = sorted(os.sched_getaffinity(0))
    done = _run(["pin"], 2)
    assert done.returncode == 0, done.stderr
    # the ranks' lines may interleave on the shared stdout: match each one's fields only
    said = dict(re.findall(r"rank (\d) share (\d+ \d+ \d+ pinned \[[^]]*\] affinity "
                           r"\[[^]]*\])", done.stdout))
    per = len(cores) // 2
    for r in (0, 1):
        mine = cores[r * per : (r + 1) * per]
        assert said[str(r)] == f"{len(cores)} 2 {per} pinned {mine} affinity {mine}", done.stdout


@needs_mpiexec
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to share")
def test_more_ranks_than_cores_are_pinned_round_robin():
    """Oversubscribed, each core takes the same ranks every frame (rank r on core r mod
    cores) instead of the OS moving them about."""
    cores = sorted(os.sched_getaffinity(0))
    ranks = 2 * len(cores)
    done = _run(["pin"], ranks)
    assert done.returncode == 0, done.stderr
    said = dict(re.findall(r"rank (\d+) share (\d+ \d+ \d+ pinned \[[^]]*\] affinity "
                           r"\[[^]]*\])", done.stdout))
    for r in range(ranks):
        mine = [cores[r % len(cores)]]
        assert said[str(r)] == f"{len(cores)} {ranks} 1 pinned {mine} affinity {mine}", \
            done.stdout


def test_orphaned_segments_of_a_failed_job_are_removed(tmp_path):
    """Segments made since the job started that no process maps go; a mapped one (a live
    job's) and an older one stay."""
    import mmap

    orphan, live, old = (tmp_path / f"mpich_shm_{n}" for n in ("orphan", "live", "old"))
    for path in (orphan, live, old):
        path.write_bytes(b"\0" * 4096)
    os.utime(old, (1.0, 1.0))
    with open(live, "r+b") as f, mmap.mmap(f.fileno(), 4096):
        removed = remove_orphaned_segments(time.time() - 60, tmp_path)
    assert removed == ["mpich_shm_orphan"]
    assert not orphan.exists() and live.exists() and old.exists()
