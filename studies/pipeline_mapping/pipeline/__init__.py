"""A real pipeline runtime to check the mapping model on (issue 22): every module instance is
an MPI process (mpi4py; ``mpiexec`` spans machines when a user has them) pinned to its
node's cores, with FIFO and greedy (latest-only) connections, busy-work modules of a set
execution time and load or modules doing this project's real work
(:mod:`studies.pipeline_mapping.pipeline.work`), and an emulated link on every non-local
connection (:mod:`studies.pipeline_mapping.pipeline.shaper`). On one machine each node of the
mapping gets its own cores (one per CPU).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from raytracer.mpi.launch import launch
from studies.pipeline_mapping.model import Mapping
from studies.pipeline_mapping.pipeline.spec import run_spec
from studies.pipeline_mapping.pipeline.work import ONE_THREAD_ENV, Work

#: Seconds a run may take beyond its own to start and set up: busy work has nothing to set up;
#: real work may compile numba's BVH builder and the OpenCL kernels from empty caches (on a
#: fresh install, or after a change to them: about 100 s on a slow 2-core machine)
SETUP_S = 60.0
REAL_WORK_SETUP_S = 600.0


class PipelineRunError(RuntimeError):
    """The MPI job failed; the message carries its last output lines."""


def run_pipeline(mapping: Mapping, seconds: float, cores: list[int] | None = None,
                 share: bool = False, timeout: float | None = None,
                 work: dict[str, Work] | None = None) -> dict[str, Any]:
    """Run ``mapping`` for ``seconds`` and return what every instance measured (by name):
    mean iteration time, compute time and CPU time (its process's) per iteration in ms,
    per-window iteration times, and per input edge the messages received, consumed and left
    over. ``share`` lets nodes share cores (see
    :func:`studies.pipeline_mapping.pipeline.spec.node_cores`); the modules named in ``work`` do
    that real work, each on one thread. ``timeout`` defaults to ``seconds`` plus the set-up
    allowance (:data:`SETUP_S`, or :data:`REAL_WORK_SETUP_S` with real work)."""
    spec = run_spec(mapping, seconds, cores, share, work)
    with tempfile.TemporaryDirectory(prefix="autotune-pipeline-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        done = launch(["studies.pipeline_mapping.pipeline.worker", str(spec_path), str(out_path)],
                      len(spec["instances"]),
                      timeout=timeout or seconds + (REAL_WORK_SETUP_S if work else SETUP_S),
                      env=ONE_THREAD_ENV)
        if done.returncode or not out_path.exists():
            tail = "\n".join(f"{done.stdout}\n{done.stderr}".strip().splitlines()[-5:])
            raise PipelineRunError(f"pipeline run failed (exit {done.returncode}): {tail}")
        results = json.loads(out_path.read_text())["modules"]
    return {r["name"]: r for r in results}
