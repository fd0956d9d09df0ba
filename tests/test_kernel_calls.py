"""The PoCL-compiled kernels make no calls to OpenCL builtins or helpers (kernels/rtmath.cl),
and the PoCL device is modelled as running work-items one at a time."""

from __future__ import annotations

import pytest

from tools.kernel_calls import (
    KernelCallsUnavailable,
    compiled_kernel_calls,
    forbidden_calls,
)


def test_pocl_kernels_make_no_builtin_calls():
    try:
        calls = compiled_kernel_calls()
    except KernelCallsUnavailable as exc:
        pytest.skip(str(exc))
    assert {"primary", "primary_packet", "shadow", "shadow_packet", "ao", "shade", "raycast",
            "raycast_packet"} <= set(calls)
    assert forbidden_calls(calls) == {}, "out-of-line calls in the PoCL kernels"


def test_pocl_device_runs_work_items_one_at_a_time():
    """PoCL runs the divergent traversal of each work-item as scalar code: SIMD width 1, so
    the probe's per-group count is each pixel's own (no slowest-lane-of-16 maximum)."""
    from raytracer.device.choice import DeviceError, choose_device

    try:
        info, _ = choose_device("pocl")
    except DeviceError as exc:
        pytest.skip(f"no PoCL device builds here: {exc}")
    assert info.kind == "CPU" and "portable computing language" in info.platform.lower()
    assert info.simd_width == 1
