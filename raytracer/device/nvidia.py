"""What an NVIDIA OpenCL device and its compiler tell about themselves, for the Hong–Kim model.

Three sources, each optional so that a device or driver lacking one loses only its figures:

- device queries: the standard ones (SMs, clock, memory, work-group limits) and, where the
  device lists ``cl_nv_device_attribute_query``, NVIDIA's (compute capability, registers per
  block, warp size, ...; codes 0x4000..0x4006 of that extension);
- the build log: with ``-cl-nv-verbose`` (``cl_nv_compiler_options``) the driver passes
  ``--verbose`` to ptxas, which logs registers, shared memory, stack and spills per kernel.
  NVIDIA's driver caches builds; a cached build may log nothing (run with
  ``CUDA_CACHE_DISABLE=1`` to force one), and then registers stay unknown (None);
- the program binary: on NVIDIA it is the driver's PTX, which ``tools/ptx_analysis.count_ptx``
  counts like the clang PTX the model's shipped counts come from (Ganestam & Doggett,
  "Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture Model", took their
  counts from the driver's code with cuobjdump); :func:`compare_counts` sets the two side by side.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyopencl as cl

from raytracer.device.choice import build_quietly

NV_ATTRIBUTE_EXTENSION = "cl_nv_device_attribute_query"
NV_COMPILER_EXTENSION = "cl_nv_compiler_options"
NV_VERBOSE = "-cl-nv-verbose"


def _code(name: str, raw: int) -> int:
    """pyopencl's constant ``cl.device_info.<name>``, or the extension's raw code if absent."""
    return int(getattr(cl.device_info, name, raw))


# figure -> device_info code: the standard queries, then cl_nv_device_attribute_query's.
STANDARD_QUERIES = {
    "name": cl.device_info.NAME,
    "sms": cl.device_info.MAX_COMPUTE_UNITS,
    "clock_mhz": cl.device_info.MAX_CLOCK_FREQUENCY,
    "global_mem_bytes": cl.device_info.GLOBAL_MEM_SIZE,
    "local_mem_per_group_bytes": cl.device_info.LOCAL_MEM_SIZE,
    "max_work_group_size": cl.device_info.MAX_WORK_GROUP_SIZE,
}
NV_QUERIES = {
    "compute_capability_major": _code("COMPUTE_CAPABILITY_MAJOR_NV", 0x4000),
    "compute_capability_minor": _code("COMPUTE_CAPABILITY_MINOR_NV", 0x4001),
    "registers_per_block": _code("REGISTERS_PER_BLOCK_NV", 0x4002),
    "warp_size": _code("WARP_SIZE_NV", 0x4003),
    "gpu_overlap": _code("GPU_OVERLAP_NV", 0x4004),
    "kernel_exec_timeout": _code("KERNEL_EXEC_TIMEOUT_NV", 0x4005),
    "integrated_memory": _code("INTEGRATED_MEMORY_NV", 0x4006),
}
NV_BOOLEANS = frozenset({"gpu_overlap", "kernel_exec_timeout", "integrated_memory"})


class NvidiaFiguresError(RuntimeError):
    """A kernel build failed, or a program binary is not the PTX text asked for."""


@dataclass(frozen=True)
class KernelResources:
    """Per-thread registers and per-block memory of one compiled kernel (None: not reported)."""

    registers: int | None = None
    shared_bytes: int | None = None  # static shared (OpenCL local) memory per work-group
    stack_bytes: int | None = None  # per-thread stack frame (OpenCL private memory)
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None


def _extensions(device: Any) -> list[str]:
    """The device's extension names (an empty list where the query itself fails)."""
    try:
        return str(device.extensions).split()
    except (cl.Error, AttributeError):
        return []


def _query(device: Any, code: int) -> tuple[Any, str | None]:
    """``(value, None)`` of one device query, or ``(None, reason)`` where it fails."""
    try:
        return device.get_info(code), None
    except (cl.Error, ValueError, TypeError, AttributeError) as exc:
        return None, f"query 0x{code:x} failed: {type(exc).__name__}: {exc}"


def nvidia_device_figures(device: Any) -> dict[str, Any]:
    """The device figures the Hong–Kim model needs, each None where unreadable, with the
    reason under ``"missing"`` (a device without NVIDIA's extension is read, not refused)."""
    figures: dict[str, Any] = {}
    missing: dict[str, str] = {}
    has_nv = NV_ATTRIBUTE_EXTENSION in _extensions(device)
    for key, code in {**STANDARD_QUERIES, **NV_QUERIES}.items():
        if key in NV_QUERIES and not has_nv:
            figures[key], missing[key] = None, f"device lacks {NV_ATTRIBUTE_EXTENSION}"
            continue
        value, reason = _query(device, code)
        if reason is not None:
            missing[key] = reason
        elif key == "name":
            value = str(value).strip()
        elif key in NV_BOOLEANS:
            value = bool(value)
        else:
            value = int(value)
        figures[key] = value
    figures["nv_attribute_query"] = has_nv
    figures["missing"] = missing
    return figures


def compute_capability(device: Any) -> tuple[int, int] | None:
    """``(major, minor)`` from ``cl_nv_device_attribute_query``; None where not reported."""
    if NV_ATTRIBUTE_EXTENSION not in _extensions(device):
        return None
    major, _ = _query(device, NV_QUERIES["compute_capability_major"])
    minor, _ = _query(device, NV_QUERIES["compute_capability_minor"])
    if major is None or minor is None:
        return None
    return int(major), int(minor)


# --------------------------------------------------------------------------- ptxas log

_ENTRY = re.compile(r"Compiling entry function\s+'([^']+)'")
_PROPERTIES = re.compile(r"Function properties for\s+'?([^'\s]+)'?")
_FRAME = re.compile(r"(\d+) bytes stack frame,\s*(\d+) bytes spill stores,\s*(\d+) bytes "
                    r"spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+)(?:\s*\+\s*(\d+))? bytes smem")


def parse_ptxas_log(text: str) -> dict[str, KernelResources]:
    """Per-kernel resources from a ptxas ``--verbose`` log (nvcc or NVIDIA's OpenCL build
    log): entry names, ``Used N registers[, ...] [, S bytes smem]``, stack frame and spills.

    A ``Used`` line belongs to the entry compiled last; stack lines to the function named in
    the ``Function properties for`` line above them, kept for entries only (device functions
    ptxas lists apart are inlined or called, not launched).
    """
    used: dict[str, dict[str, int]] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    entry: str | None = None
    props: str | None = None
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            used.setdefault(entry, {})
        elif m := _PROPERTIES.search(line):
            props = m.group(1)
        elif (m := _FRAME.search(line)) and props is not None:
            frames[props] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif (m := _USED.search(line)) and entry is not None:
            used[entry]["registers"] = int(m.group(1))
            if s := _SMEM.search(line):
                used[entry]["shared_bytes"] = int(s.group(1)) + int(s.group(2) or 0)
    out = {}
    for name, figures in used.items():
        stack = frames.get(name, (None, None, None))
        out[name] = KernelResources(  # ptxas omits "bytes smem" when a kernel uses none
            registers=figures.get("registers"),
            shared_bytes=figures.get("shared_bytes", 0 if "registers" in figures else None),
            stack_bytes=stack[0],
            spill_store_bytes=stack[1],
            spill_load_bytes=stack[2],
        )
    return out


def kernel_resources(program_source: str, options: list[str], context: cl.Context,
                     device: cl.Device) -> dict[str, KernelResources]:
    """Per-kernel resources of ``program_source`` built with ``options`` on ``device``: the
    ptxas log where the device takes ``-cl-nv-verbose``, and the OpenCL work-group queries
    (local memory as shared, private memory as stack) for what the log lacks."""
    verbose = NV_COMPILER_EXTENSION in _extensions(device)
    build_options = [*options, NV_VERBOSE] if verbose else list(options)
    try:
        program = build_quietly(cl.Program(context, program_source), build_options)
    except cl.Error as exc:
        raise NvidiaFiguresError(f"kernel build failed on {device.name.strip()} "
                                 f"({' '.join(build_options) or 'no options'}):\n{exc}") from None
    logged = parse_ptxas_log(program.get_build_info(device, cl.program_build_info.LOG))
    out = {}
    for kernel in program.all_kernels():
        name = kernel.function_name
        res = logged.get(name, KernelResources())
        if res.shared_bytes is None:
            res = dataclasses.replace(res, shared_bytes=int(kernel.get_work_group_info(
                cl.kernel_work_group_info.LOCAL_MEM_SIZE, device)))
        if res.stack_bytes is None:
            res = dataclasses.replace(res, stack_bytes=int(kernel.get_work_group_info(
                cl.kernel_work_group_info.PRIVATE_MEM_SIZE, device)))
        out[name] = res
    return out


# --------------------------------------------------------------------------- driver PTX


def driver_ptx(program: cl.Program) -> str:
    """The built program's binary for its first device as text: PTX on NVIDIA's driver."""
    binary = bytes(program.get_info(cl.program_info.BINARIES)[0])
    device = program.get_info(cl.program_info.DEVICES)[0].name.strip()
    try:
        text = binary.rstrip(b"\0").decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    head = text.lstrip()
    if not head.startswith(("//", ".version")):
        raise NvidiaFiguresError(f"the program binary for {device} is not PTX text (it starts "
                                 f"{binary[:16]!r}); only NVIDIA's driver returns PTX")
    return text


def _fields(counts: Any) -> dict[str, float]:
    """Field -> count of one kernel's counts (a dataclass such as LoopCounts, or a mapping)."""
    items = dataclasses.asdict(counts) if dataclasses.is_dataclass(counts) else dict(counts)
    return {key: float(value) for key, value in items.items()}


def compare_counts(driver: Mapping[str, Any], clang: Mapping[str, Any]
                   ) -> dict[str, dict[str, dict[str, float | None]]]:
    """Per kernel and count field (per loop region: ``i_ct`` ... ``i_mco``): the driver's
    count, clang's and driver / clang (None where clang's is 0 or a side lacks the kernel).

    Count both sides the same way (both plain ``count_ptx``, or both leaf-split) for a fair
    ratio; a kernel only one side has appears with None on the other.
    """
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for kernel in sorted(set(driver) | set(clang)):
        d = _fields(driver[kernel]) if kernel in driver else {}
        c = _fields(clang[kernel]) if kernel in clang else {}
        rows: dict[str, dict[str, float | None]] = {}
        for key in dict.fromkeys([*c, *d]):
            dv, cv = d.get(key), c.get(key)
            ratio = dv / cv if dv is not None and cv else None
            rows[key] = {"driver": dv, "clang": cv, "ratio": ratio}
        out[kernel] = rows
    return out
