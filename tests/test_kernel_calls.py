"""The PoCL-compiled kernels make no calls to OpenCL builtins or helpers (kernels/rtmath.cl)."""

from __future__ import annotations

import pytest

from raytracer.kernel_calls import (
    KernelCallsUnavailable,
    compiled_kernel_calls,
    forbidden_calls,
)


def test_pocl_kernels_make_no_builtin_calls():
    try:
        calls = compiled_kernel_calls()
    except KernelCallsUnavailable as exc:
        pytest.skip(str(exc))
    assert {"primary", "shadow", "ao", "shade"} <= set(calls)
    assert forbidden_calls(calls) == {}, "out-of-line calls in the PoCL kernels"
