"""How fast this host runs a fixed workload, on one core and on all cores at once: a figure
each run records, because hosts with the same CPU label can differ twofold in speed.

Two hosts both named ``amd-epyc-family25-model1-2cpus`` rendered the same frames 2x apart
while single-core microbenchmarks agreed within 20 %, so frame-relative figures from them are
not comparable. Each worker process, pinned to one core, times a compute chain on a cache-held
array and a copy of a 64 MiB array; the figures are taken with one worker alone and with one
worker per core together. ``all_cores_slowdown`` above about 1.2 says the cores share
something (an SMT sibling, a throttled host) that the renderers, which use every core, pay.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

#: The worker: pins itself, warms up, waits for "go" on stdin, prints its best times (s).
_WORKER = r"""
import json, os, sys, time
import numpy as np
os.sched_setaffinity(0, {int(sys.argv[1])})
small = np.linspace(0.0, 1.0, 1 << 15)
scratch = np.empty_like(small)
big = np.ones(1 << 23)
copy = np.empty_like(big)
def compute():
    for _ in range(40):
        np.multiply(small, 1.0001, out=scratch)
        np.sqrt(scratch, out=scratch)
        np.add(scratch, small, out=scratch)
def stream():
    np.copyto(copy, big)
def best(fn, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return min(times)
best(compute, 2); best(stream, 2)
sys.stdin.readline()
print(json.dumps({"compute": best(compute, 15), "stream": best(stream, 8)}))
"""


def _run_workers(cores: list[int]) -> list[dict[str, float]]:
    """Start one worker per core, release them together, and collect their best times."""
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, str(core)],
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
    """The host's speed: compute (ns per element of the chain) and copy bandwidth (GB/s), one
    core alone and every core at once (their mean), and how much slower a core gets when all
    work (``all_cores_slowdown``: the larger of the two ratios)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
        alone = _run_workers(cores[:1])[0]
        together = _run_workers(cores)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return {"not_measured": f"{type(exc).__name__}: {exc}"}
    elements = 40 * (1 << 15)
    copied_bytes = 2 * 8 * (1 << 23)  # read + write

    def compute_ns(times: dict[str, float]) -> float:
        return times["compute"] / elements * 1e9

    def stream_gbs(times: dict[str, float]) -> float:
        return copied_bytes / times["stream"] / 1e9

    compute_all = sum(compute_ns(t) for t in together) / len(together)
    stream_all = sum(stream_gbs(t) for t in together) / len(together)
    return {"cores": len(cores),
            "compute_ns_one_core": round(compute_ns(alone), 4),
            "compute_ns_all_cores": round(compute_all, 4),
            "copy_gbs_one_core": round(stream_gbs(alone), 3),
            "copy_gbs_all_cores": round(stream_all, 3),
            "all_cores_slowdown": round(max(compute_all / compute_ns(alone),
                                            stream_gbs(alone) / stream_all), 3)}
