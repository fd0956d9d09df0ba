"""How fast and how steadily this host runs a fixed workload, on one core and on all cores at
once: a figure each run records, because hosts with the same CPU label differ.

Two hosts both named ``amd-epyc-family25-model1-2cpus`` rendered the same frames up to 2x
apart, and re-rendered one view at fixed knobs with a spread 4-18x apart (the noise floor of
``bench tracer-tuned``), while single-core microbenchmarks agreed within 20 % and the runs
counted as quiet: what differed was other tenants on the physical host, which no process
list shows. Each worker process, pinned to one core, times a compute chain on a cache-held
array, a copy of a 64 MiB array and random reads from a 16 MiB table (the volume renderer's
access pattern); one worker alone, then one per core together. ``compute_jitter`` is the
mean distance of the lone worker's compute passes from their median: a host where it is
several percent scatters frames as much (the noisy host above: 4-6 %, while dragon's
re-rendered view strayed 7 % from its median against 1.8 % on the quiet one), and there the
tracking goals measure the host as much as the tuner. ``all_cores_slowdown`` above about 1.2
says the cores share something (an SMT sibling, a throttled host) that the renderers, which
use every core, pay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

PASSES = 60  # timed compute passes (about 2.5 ms each); the best and the spread are taken

#: The worker (argv: its core, the compute passes): pins itself, warms up, waits for "go" on
#: stdin, then prints its figures: the best compute pass (ns per element of the chain), the
#: best copy (GB/s read + written), the best gather (ns per random read), and the jitter of
#: its compute passes. Each figure is scaled here, where the sizes are.
_WORKER = r"""
import json, os, sys, time
import numpy as np
os.sched_setaffinity(0, {int(sys.argv[1])})
small = np.linspace(0.0, 1.0, 1 << 15)
scratch = np.empty_like(small)
big = np.ones(1 << 23)
copy = np.empty_like(big)
table = np.arange(1 << 22, dtype=np.float32)
picks = np.random.default_rng(1).integers(0, table.size, 1 << 18)
gathered = np.empty(picks.size, np.float32)
CHAIN = 40
def compute():
    for _ in range(CHAIN):
        np.multiply(small, 1.0001, out=scratch)
        np.sqrt(scratch, out=scratch)
        np.add(scratch, small, out=scratch)
def stream():
    np.copyto(copy, big)
def gather():
    np.take(table, picks, out=gathered)
def timed(fn, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return np.array(times)
timed(compute, 2); timed(stream, 2); timed(gather, 2)
sys.stdin.readline()
passes = timed(compute, int(sys.argv[2]))
median = np.median(passes)
print(json.dumps({"compute_ns": passes.min() / (CHAIN * small.size) * 1e9,
                  "copy_gbs": (big.nbytes + copy.nbytes) / timed(stream, 8).min() / 1e9,
                  "gather_ns": timed(gather, 15).min() / picks.size * 1e9,
                  "jitter": float(np.mean(np.abs(passes - median)) / median)}))
"""


def _run_workers(cores: list[int]) -> list[dict[str, float]]:
    """Start one worker per core, release them together, and collect their figures."""
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, str(core), str(PASSES)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for core in cores]
    try:
        for worker in workers:  # each blocks on its readline until all are started
            worker.stdin.write("go\n")
            worker.stdin.flush()
        return [json.loads(worker.communicate(timeout=60)[0]) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()


def measure_host_speed() -> dict[str, float | int | str]:
    """The host's speed: compute (ns per element of the chain), copy bandwidth (GB/s) and
    random reads (ns each), one core alone and every core at once (their mean); the lone
    core's compute jitter; and how much slower a core gets when all work
    (``all_cores_slowdown``: the largest of the ratios)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
        alone = _run_workers(cores[:1])[0]
        together = _run_workers(cores)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return {"not_measured": f"{type(exc).__name__}: {exc}"}
    every = {key: sum(t[key] for t in together) / len(together) for key in alone}
    return {"cores": len(cores),
            "compute_ns_one_core": round(alone["compute_ns"], 4),
            "compute_ns_all_cores": round(every["compute_ns"], 4),
            "compute_jitter": round(alone["jitter"], 4),
            "copy_gbs_one_core": round(alone["copy_gbs"], 3),
            "copy_gbs_all_cores": round(every["copy_gbs"], 3),
            "gather_ns_one_core": round(alone["gather_ns"], 3),
            "gather_ns_all_cores": round(every["gather_ns"], 3),
            "all_cores_slowdown": round(max(every["compute_ns"] / alone["compute_ns"],
                                            alone["copy_gbs"] / every["copy_gbs"],
                                            every["gather_ns"] / alone["gather_ns"]), 3)}
