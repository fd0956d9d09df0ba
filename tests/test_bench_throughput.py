"""bench throughput: its build figures (ours and Embree's build of the same triangles, side by side)
and its figures of the calls in the PoCL-compiled kernels, found from any working folder."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from benchmarks.renderers.throughput import bench_build


def test_build_figures_hold_embrees_build_of_the_same_triangles() -> None:
    rng = np.random.default_rng(3)
    tris = (rng.random((600, 1, 3)) + 0.02 * rng.standard_normal((600, 3, 3))).astype(np.float32)
    figures = bench_build(tris, repeats=2)
    assert figures["triangles"] == 600
    assert 0 < figures["embree_build_seconds_min"] <= figures["embree_build_seconds_median"]
    assert 0 < figures["build_seconds_min"] <= figures["build_seconds_median"]
    assert figures["ratio_embree_over_ours"] == (figures["embree_build_seconds_min"]
                                                 / figures["build_seconds_min"])
    assert figures["sah_binned"] > 0 and figures["sah_full_sweep"] > 0


def test_kernel_call_figures_find_the_tool_outside_the_repository_folder(tmp_path) -> None:
    """``autotune bench throughput`` runs with the console script's folder on sys.path, not
    the checkout's: the figures must still come from tools/kernel_calls.py."""
    code = ("import json, sys; sys.path = [p for p in sys.path if p not in ('', '.')]\n"
            "from benchmarks.renderers.throughput import kernel_call_figures\n"
            "print(json.dumps(kernel_call_figures()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, check=True).stdout
    figures = json.loads(out.splitlines()[-1])
    # the tool's figures, or its own reason (no PoCL device, no objdump) for having none
    assert "forbidden" in figures or "kernel_calls.py" not in figures["skipped"]
