"""The programs every rank of the benchmark's ``mpiexec`` jobs runs: term, real, node, emulate."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from common.atomic_files import write_json
from raytracer.mpi.faults import install_excepthook, world
from raytracer.mpi.pinning import share_node
from raytracer.volume.distributed import load_everywhere, seed_orbit
from raytracer.volume.span_blend import kernels
from studies.cluster_prediction.files import read_training_data, write_training_data
from studies.cluster_prediction.perf_histogram import PathHistogram
from studies.cluster_prediction.training_data import (
    EmulationConfig,
    first_ranks,
    idle_barrier,
    network,
    run_node,
    run_plan,
    run_real,
)


def worker_term(out: str, repeats: int, net: str) -> None:
    """2 ranks: Sendrecv seconds per message size, blend rate; rank 0 writes ``out``."""
    from mpi4py import MPI  # lazy: importing it initialises MPI; the launching process must not

    comm = network(MPI.COMM_WORLD, net)
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        raise SystemExit("the term part needs exactly 2 ranks")
    points = []
    for nbytes in [1 << k for k in range(10, 25, 2)]:
        send = np.ones(nbytes // 4, np.float32)
        recv = np.empty_like(send)
        times = []
        for i in range(repeats + 1):
            comm.Barrier()
            t = time.perf_counter()
            comm.Sendrecv([send, MPI.FLOAT], 1 - rank, 5, [recv, MPI.FLOAT], 1 - rank, 5)
            if i:
                times.append(time.perf_counter() - t)
        points.append((nbytes, times))
    blend = blend_rate(repeats) if rank == 0 else None
    comm.Barrier()
    if rank == 0:
        write_json(out, {"points": points, "blend_rate": blend})


def blend_rate(repeats: int) -> float:
    """Pixels per second of the numba "over" blend on 1 Mi pixels (median of ``repeats``)."""
    over, _ = kernels()
    npix = 1 << 20
    rng = np.random.default_rng(0)
    a, b = (rng.random(npix * 4, dtype=np.float32) for _ in range(2))
    over(a, b)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        over(a, b)
        times.append(time.perf_counter() - t)
    return npix / float(np.median(times))


def worker_real(plan_path: str, out: str) -> None:
    """Real runs of the plan on sub-communicators; rank 0 adds each run to ``out``. The job's
    ranks are pinned as the product pins them (:func:`~raytracer.mpi.pinning.share_node`: one
    core each, round robin beyond the cores), so the first ranks, which render each run, sit
    on cores of their own. Left unpinned, the 2-rank 256² run at step 3 took 7.0-12.6 ms a
    frame over eight paths (four jobs), pinned 6.6-8.1 ms; its node run 6.2-6.7 ms."""
    plan = json.loads(Path(plan_path).read_text())
    comm = world()
    share_node(comm)  # before the first OpenCL query: the runtimes' threads inherit it
    volume, tf = load_everywhere(plan["volume"], None, comm)
    done: dict[str, Any] = {}
    if comm.Get_rank() == 0 and Path(out).exists():
        done = json.loads(Path(out).read_text())
    bar = _bar(len(plan["runs"]), "real runs") if comm.Get_rank() == 0 else None
    for ranks in sorted({r["ranks"] for r in plan["runs"]}):
        sub = first_ranks(comm, ranks)
        for run in (r for r in plan["runs"] if r["ranks"] == ranks):
            if sub is not None:
                got = run_real(sub, volume, tf, run["size"], run["size"], plan["frames"],
                               run["step"])
                if got is not None:
                    done[run["key"]] = {**run, "frames": plan["frames"],
                                        "render_seconds": got.render_seconds.tolist(),
                                        "frame_seconds": got.frame_seconds.tolist(),
                                        "composite_seconds": got.composite_seconds.tolist(),
                                        "load_avg": os.getloadavg()[0]}
                    write_json(out, done, indent=None)
            if bar is not None:
                bar.update(1)
            idle_barrier(comm)
        if sub is not None and sub is not comm:
            sub.Free()
    if bar is not None:
        bar.close()


def worker_node(plan_path: str, out: str) -> None:
    """Node runs of the plan in this one process (see run_node); writes each to ``out``."""
    plan = json.loads(Path(plan_path).read_text())
    volume, tf = load_everywhere(plan["volume"], None, world())
    cams = seed_orbit(volume.radius, plan["frames"], phase=plan["phase"])
    done: dict[str, Any] = json.loads(Path(out).read_text()) if Path(out).exists() else {}
    for ranks in sorted({r["ranks"] for r in plan["runs"]}):
        runs = [r for r in plan["runs"] if r["ranks"] == ranks]
        got = run_node(volume, tf, ranks, sorted({r["size"] for r in runs}),
                       sorted({r["step"] for r in runs}), cams)
        for run in runs:
            done[run["key"]] = {**run, "frames": plan["frames"], "phase": plan["phase"],
                                "render_seconds": got[(run["step"], run["size"])].tolist(),
                                "load_avg": os.getloadavg()[0]}
        write_json(out, done, indent=None)


def worker_emulate(plan_path: str, data_path: str) -> None:
    """Emulation runs of the plan; rank 0 appends every row to ``data_path`` atomically."""
    plan = json.loads(Path(plan_path).read_text())
    comm = world()
    hists = {k: (PathHistogram.from_dict(v["hist"], f"{plan_path}: {k}"), v["source"])
             for k, v in plan["histograms"].items()}
    configs = [EmulationConfig(**c) for c in plan["configs"]]
    data = read_training_data(data_path, missing_ok=True) if comm.Get_rank() == 0 else None
    bar = _bar(len(configs), plan.get("label", "emulation")) if comm.Get_rank() == 0 else None

    def sink(row: dict[str, Any]) -> None:
        data.add(row)
        write_training_data(data_path, data)

    run_plan(comm, configs, hists, sink if data is not None else None,
             (lambda c: bar.update(1)) if bar is not None else None)
    if bar is not None:
        bar.close()


def _bar(total: int, desc: str) -> Any:
    return tqdm(total=total, desc=desc, file=sys.stderr, mininterval=2.0)


def worker_main(argv: list[str]) -> int:
    """Run the part ``argv[0]`` with its arguments on this rank."""
    install_excepthook()
    part = argv[0]
    if part == "term":
        worker_term(argv[1], int(argv[2]), argv[3])
    elif part == "real":
        worker_real(argv[1], argv[2])
    elif part == "node":
        worker_node(argv[1], argv[2])
    elif part == "emulate":
        worker_emulate(argv[1], argv[2])
    else:
        raise SystemExit(f"unknown worker part {part!r}")
    return 0
