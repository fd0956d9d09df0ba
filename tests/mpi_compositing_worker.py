"""Worker run under ``mpiexec -n K python -m mpi4py`` by tests/test_volume_compositing.py.

Modes:
  pattern-all W H SEED   the same on sub-communicators of 1..K ranks in one job; freeing each
                         frees its shared window.
  pattern W H SEED   every algorithm and transport, several visibility orders (rank order,
                     reversed, shuffled): each rank paints its id in its own pixels plus a
                     translucent global layer; rank 0 checks every pixel against the serial
                     "over" of the same layers in the same order and against the serial run
                     of the schedule.
  kill T             rank 1 SIGKILLs itself while the others wait in compositing.
  raise T            rank 2 raises inside compositing (its blend fails).
  hang T             rank 1 never arrives; the others' compositing watchdog (1 s) fires.
                     (T: the transport, messages or shared)
  agree              rank 2 finds bad input; every rank must raise the same error.
  threads            prints each rank's POCL_MAX_PTHREAD_COUNT share.

Fault modes print ``FAULT AT <unix time>`` just before the fault, so the test can time the
job's end from the fault.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time

import numpy as np

from raytracer.mpi.faults import AgreedError, abort, agree, install_excepthook, world
from raytracer.mpi.pinning import share_node
from raytracer.mpi.watchdog import watchdog
from raytracer.volume.compositing import (
    ALGORITHMS,
    composite,
    composite_buffer,
    composite_serial,
    engine,
    schedule,
    shared_window,
)
from raytracer.volume.span_blend import over_serial

# (transport asked for, image rendered into composite_buffer, transport that must run)
VARIANTS = (
    ("messages", True, "messages"),
    ("auto", False, "messages"),
    ("auto", True, "shared"),
    ("shared", True, "shared"),
)


def paint(rank: int, size: int, width: int, height: int) -> np.ndarray:
    """Rank ``rank``'s layer: its id in its own columns (alpha 0.6) over a translucent wash."""
    ys, xs = np.mgrid[0:height, 0:width]
    alpha = np.full((height, width), 0.05 + 0.1 * (rank % 3), np.float32)
    own = (xs + 3 * ys) % size == rank
    alpha[own] = 0.6
    color = np.stack(
        [
            np.full((height, width), (rank + 1) / (size + 1), np.float32),
            ((xs + rank) % 7 / 7.0).astype(np.float32),
            ((ys * (rank + 1)) % 5 / 5.0).astype(np.float32),
        ],
        axis=-1,
    )
    return np.concatenate([color * alpha[..., None], alpha[..., None]], axis=-1).astype(np.float32)


def orders(size: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return [list(range(size)), list(range(size))[::-1], [int(r) for r in rng.permutation(size)]]


def pattern_all(width: int, height: int, seed: int) -> None:
    """:func:`pattern` on sub-communicators of 1, 2, ... size ranks, in one job (one start-up)."""
    from mpi4py import MPI

    world_comm = world()
    for ranks in range(1, world_comm.Get_size() + 1):
        inside = world_comm.Get_rank() < ranks
        sub = world_comm.Split(0 if inside else MPI.UNDEFINED, world_comm.Get_rank())
        if inside:
            pattern(width, height, seed + ranks, sub)
            sub.Free()
            assert not shared_window._LIVE, "freeing a communicator left its window"
        world_comm.Barrier()


def pattern(width: int, height: int, seed: int, comm=None) -> None:
    comm = world() if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    layers = [paint(r, size, width, height) for r in range(size)]
    checked = 0
    for order, algorithm, (transport, in_window, runs) in itertools.product(
        orders(size, seed), ALGORITHMS, VARIANTS
    ):
        reference = over_serial([layers[r] for r in order])
        if in_window:
            image = composite_buffer(layers[rank].shape, comm, transport)
            np.copyto(image, layers[rank])
        else:
            image = layers[rank].copy()
        with watchdog("compositing", 20.0):
            result = composite(image, order, algorithm, comm, transport=transport)
        assert len(result.stages) == len(schedule(algorithm, size, width * height))
        assert result.transport == ("messages" if size == 1 else runs), result.transport
        what = f"{algorithm} over {transport} (image in the window: {in_window}) order {order}"
        if rank == 0:
            final = result.image
            assert final is not None and final.shape == (height, width, 4)
            err = float(np.abs(final - reference).max())
            if err > 1e-6:
                raise AssertionError(f"{what}: max |d| {err:.3g}")
            if not np.array_equal(final, composite_serial(layers, order, algorithm)):
                raise AssertionError(f"{what}: differs from serial run")
            checked += 1
        else:
            assert result.image is None
    if size > 1:  # a private image on the shared transport: the same error on every rank
        try:
            composite(layers[rank].copy(), list(range(size)), "radix-k", comm, transport="shared")
        except ValueError as exc:
            assert "composite_buffer" in str(exc), exc
        else:
            raise AssertionError("the shared transport took an image outside its window")
    if rank == 0:
        print(f"OK ranks={size} checked={checked}", flush=True)


def fault_at() -> None:
    print(f"FAULT AT {time.time():.6f}", flush=True)


def faults(mode: str, transport: str) -> None:
    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    image = paint(rank, size, 64, 64)
    if transport == "shared":  # every rank has its slot before the fault
        slot = composite_buffer(image.shape, comm, transport)
        np.copyto(slot, image)
        image = slot
    order = list(range(size))
    if mode == "hang":  # every rank has started: the 1 s watchdog times the hang, not start-up
        comm.Barrier()
    if mode == "kill" and rank == 1:
        time.sleep(0.5)  # let the others reach compositing
        fault_at()
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "raise" and rank == 2:
        time.sleep(0.5)
        fault_at()

        def broken(front: np.ndarray, back: np.ndarray) -> None:
            raise RuntimeError("injected blend fault")

        engine.under_into_front = broken
        engine.over_into_back = broken
    if mode == "hang" and rank == 1:
        fault_at()
        time.sleep(60)
    with watchdog("compositing", 1.0 if mode == "hang" else 30.0):
        composite(image, order, "binary-swap", transport=transport)
    print(f"rank {rank} finished (unexpected)", flush=True)


def agreement() -> None:
    comm = world()
    rank = comm.Get_rank()
    try:
        agree(rank != 2, "volume.raw: 1000 bytes, expected 4096 for 16x16x16 uint8")
    except AgreedError as exc:
        print(f"rank {rank} raised: {exc}", flush=True)
        return
    print(f"rank {rank} did not raise", flush=True)


def main(argv: list[str]) -> int:
    install_excepthook()
    if argv[0] == "pattern":
        pattern(int(argv[1]), int(argv[2]), int(argv[3]))
    elif argv[0] == "pattern-all":
        pattern_all(int(argv[1]), int(argv[2]), int(argv[3]))
    elif argv[0] == "agree":
        agreement()
    elif argv[0] == "threads":
        threads = share_node(cores=int(argv[1])).threads
        print(f"rank {world().Get_rank()} threads {threads} env "
              f"{os.environ['POCL_MAX_PTHREAD_COUNT']}", flush=True)
    elif argv[0] == "muted-abort":  # rank 1's stderr goes nowhere: only the launcher hears
        comm = world()
        if comm.Get_rank() == 1:
            os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
            abort(comm, 3, "rank 1 failed: a message stderr lost")
        comm.Barrier()
    elif argv[0] == "pin":
        share = share_node()
        print(f"rank {world().Get_rank()} share {share.cores} {share.ranks} {share.threads} "
              f"pinned {list(share.pinned)} affinity {sorted(os.sched_getaffinity(0))}",
              flush=True)
    else:
        faults(argv[0], argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
