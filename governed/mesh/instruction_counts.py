"""Per-loop instruction counts of the tracer kernels, as the model needs them at run time.

The §4.3 equations need, per kernel, compute and memory instructions per BVH traversal step
(``i_ct, i_mt``), per leaf test (``i_ci, i_mi``: a leaf's up to four triangles tested at
once) and outside the loops (``i_cco, i_mco``). They come from the compiled kernels' PTX,
counted at build time by ``tools/ptx_analysis.py`` (rules there) and shipped as
``governed/mesh/data/kernel_counts.json``; this module loads and validates that file.
Regenerate it after editing any kernel: ``python tools/count_ptx.py`` (the file records the
SHA-256 of the kernel code, comments and layout left out; :func:`counts_are_current` checks
it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from common.json_file import read_json
from models.raytrace_cost import LoopCounts
from raytracer.device.launches import KernelLaunches

COUNTS_PATH = Path(__file__).resolve().parent / "data" / "kernel_counts.json"
LOOP_FIELDS = tuple(f.name for f in fields(LoopCounts))


class KernelCountsError(ValueError):
    """Kernel counts could not be read or derived: corrupt JSON or unexpected PTX structure."""


# a comment (block or line) and a run of white space: what a kernel's fingerprint leaves out
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)
_SPACE = re.compile(r"\s+")


def source_sha256(source: str) -> str:
    """SHA-256 of the kernel code, stored with the counts (and through them in every
    calibration) to detect stale ones: comments are left out and white space runs count as one
    space, so editing a comment or the layout voids neither the counts nor a calibration."""
    code = _SPACE.sub(" ", _COMMENT.sub(" ", source)).strip()
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- loading


def _read_document(path: Path) -> dict[str, Any]:
    data = read_json(
        path, KernelCountsError, "kernel counts", " (run python tools/count_ptx.py)"
    )
    if not isinstance(data, dict):
        raise KernelCountsError(f"{path}: expected a JSON object, got {type(data).__name__}")
    for key in ("source_sha256", "compiler", "phases"):
        if key not in data:
            raise KernelCountsError(f"{path}: missing field {key!r}")
    if not isinstance(data["source_sha256"], str):
        raise KernelCountsError(f"{path}: field 'source_sha256' must be a string")
    if not isinstance(data["phases"], dict) or not data["phases"]:
        raise KernelCountsError(f"{path}: field 'phases' must be a non-empty object")
    return data


def load_kernel_counts(path: str | Path | None = None) -> dict[str, LoopCounts]:
    """Validated per-phase ``LoopCounts`` from the counts JSON (default: the shipped file)."""
    path = Path(path) if path is not None else COUNTS_PATH
    data = _read_document(path)
    out: dict[str, LoopCounts] = {}
    for phase, entry in data["phases"].items():
        if not isinstance(entry, dict):
            raise KernelCountsError(f"{path}: phase {phase!r} must be an object")
        unknown = sorted(set(entry) - set(LOOP_FIELDS))
        if unknown:
            raise KernelCountsError(f"{path}: phase {phase!r} has unknown field(s) {unknown}")
        values = {}
        for f in LOOP_FIELDS:
            v = entry.get(f, 0.0)
            if not isinstance(v, int | float) or isinstance(v, bool):
                raise KernelCountsError(f"{path}: {phase}.{f} must be a number, got {v!r}")
            values[f] = float(v)
        try:
            out[phase] = LoopCounts(**values)
        except ValueError as exc:
            raise KernelCountsError(f"{path}: phase {phase!r}: {exc}") from None
    for needed in ("primary", "shadow", "ao"):
        if needed not in out:
            raise KernelCountsError(f"{path}: missing phase {needed!r}")
    if not any(k in out for k in ("shade", "shade_phong", "shade_flat")):
        raise KernelCountsError(f"{path}: missing a shade phase")
    return out


def counts_fingerprint(path: str | Path | None = None) -> str:
    """The counts file's kernel-source SHA-256: what a calibration fitted with these counts
    records (``AppCalibration.kernels``)."""
    return _read_document(Path(path) if path is not None else COUNTS_PATH)["source_sha256"]


def kernels_fingerprint(launches: KernelLaunches, options: Sequence[str] = (),
                        path: str | Path | None = None) -> str:
    """What a calibration is fitted for (``AppCalibration.kernels``): the counts' kernel-source
    SHA-256, then the kernels launched other than by default, then the build ``options``
    (``build=cl-fast-relaxed-math+DINLINE_MATH``): a kernel's time depends on all three (see
    ``raytracer/device/launches.py``; PoCL's inline math is one option)."""
    signature = launches.signature
    build = "+".join(o.lstrip("-") for o in options)
    return (counts_fingerprint(path) + (f" {signature}" if signature else "")
            + (f" build={build}" if build else ""))


def counts_are_current(path: str | Path | None = None, source: str | None = None) -> bool:
    """Whether the counts file was generated from the current kernel source (SHA-256 match)."""
    if source is None:
        from raytracer.mesh.tracer import kernel_source  # lazy: loads numba and the BVH

        source = kernel_source()
    data = _read_document(Path(path) if path is not None else COUNTS_PATH)
    return data["source_sha256"] == source_sha256(source)
