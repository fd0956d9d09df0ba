"""Departure-delay fit on synthetic curves; quick microbenchmarks on a real OpenCL device."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pyopencl as cl
import pytest

from governed.mesh.microbench import (
    FULL_WARPS,
    QUICK_WARPS,
    MicrobenchError,
    MicrobenchResult,
    default_max_blocks_per_core,
    default_warps_per_core,
    fit_departure_delay,
    measure_device_profile,
    profile_from_microbench,
    run_microbench,
)
from raytracer.device.choice import DeviceError, choose_device


def test_fit_recovers_exact_parameters() -> None:
    n = np.array([1, 2, 4, 8, 16, 32, 64], float)
    fit = fit_departure_delay(n, np.maximum(400.0, 20.0 * n))
    assert fit.latency == pytest.approx(400.0)
    assert fit.departure_delay == pytest.approx(20.0)
    assert fit.limited_points == 2  # 32 and 64 warps are past the knee at 20


def test_fit_with_noise_and_unsorted_points() -> None:
    rng = np.random.default_rng(1)
    n = rng.permutation(np.array([1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64], float))
    y = np.maximum(730.0, 30.0 * n) * np.exp(rng.normal(0.0, 0.03, n.size))
    fit = fit_departure_delay(n, y)  # knee at 24.3 warps: 4 points past it
    assert fit.latency == pytest.approx(730.0, rel=0.05)
    assert fit.departure_delay == pytest.approx(30.0, rel=0.08)


def test_fit_edge_cases() -> None:
    n = np.array([1.0, 2.0, 4.0])
    flat = fit_departure_delay(n, [500.0, 500.0, 500.0])
    assert flat.latency == pytest.approx(500.0)
    assert flat.limited_points == 0
    assert flat.departure_delay == pytest.approx(125.0)  # upper bound: latency / max warps
    linear = fit_departure_delay(n, 30.0 * n)
    assert linear.departure_delay == pytest.approx(30.0)
    assert linear.limited_points >= 2  # the first point sits on the knee either way
    with pytest.raises(ValueError):
        fit_departure_delay([1.0], [2.0])
    with pytest.raises(ValueError):
        fit_departure_delay([1.0, 2.0], [1.0, math.nan])
    with pytest.raises(ValueError):
        fit_departure_delay([1.0, 2.0], [1.0, -2.0])


class FakeGpu:
    """A GPU for the occupancy defaults: vendor, type, extensions and the NVIDIA attributes."""

    def __init__(self, vendor: str, cc: tuple[int, int] | None) -> None:
        self.vendor = vendor
        self.type = cl.device_type.GPU
        self.max_work_group_size = 1024
        self.extensions = "cl_khr_fp64" + (" cl_nv_device_attribute_query" if cc else "")
        self.answers = {0x4000: cc[0], 0x4001: cc[1]} if cc else {}

    def get_info(self, code: int) -> int:
        if code not in self.answers:
            raise cl.LogicError(f"clGetDeviceInfo 0x{code:x}: INVALID_VALUE")
        return self.answers[code]


WARP32 = SimpleNamespace(simd_width=32)


def test_nvidia_occupancy_defaults() -> None:
    h200 = FakeGpu("NVIDIA Corporation", (9, 0))
    assert default_max_blocks_per_core(h200) == 32  # 64-item groups: the 32-block cap
    # One-warp groups: 32 blocks of 1 warp are resident, so the sweep stops at 32 warps.
    assert default_warps_per_core(WARP32, h200, quick=False) == tuple(
        n for n in FULL_WARPS if n <= 32)
    assert default_warps_per_core(WARP32, h200, quick=True) == QUICK_WARPS
    turing = FakeGpu("NVIDIA Corporation", (7, 5))
    assert default_max_blocks_per_core(turing) == 16
    assert max(default_warps_per_core(WARP32, turing, quick=False)) == 16
    ada = FakeGpu("NVIDIA Corporation", (8, 9))
    assert max(default_warps_per_core(WARP32, ada, quick=False)) == 24


def test_occupancy_defaults_without_the_extension() -> None:
    for device, blocks in ((FakeGpu("NVIDIA Corporation", None), 16),
                           (FakeGpu("NVIDIA Corporation", (12, 0)), 16),  # not in the table
                           (FakeGpu("Advanced Micro Devices, Inc.", None), 8)):
        assert default_max_blocks_per_core(device) == blocks
        assert default_warps_per_core(WARP32, device, quick=False) == FULL_WARPS
    cpu = FakeGpu("GenuineIntel", None)
    cpu.type = cl.device_type.CPU
    assert default_max_blocks_per_core(cpu) == 1
    assert default_warps_per_core(SimpleNamespace(simd_width=1), cpu, quick=True) == QUICK_WARPS


def _device_or_skip():
    try:
        return choose_device()
    except DeviceError as exc:
        pytest.skip(f"no OpenCL device: {exc}")


@pytest.fixture(scope="module")
def quick_result() -> MicrobenchResult:
    info, device = _device_or_skip()
    messages: list[str] = []
    result = run_microbench(info, device, quick=True, progress=messages.append)
    assert result.clock_ghz == pytest.approx(info.clock_mhz / 1e3)
    assert result.warp_size == min(info.simd_width, device.max_work_group_size)
    assert result.raw["clock_source"] == info.clock_source
    assert messages[0] == "build" and messages[-1] == "bandwidth"
    return result


def test_quick_microbench_is_plausible(quick_result: MicrobenchResult) -> None:
    r = quick_result
    for value in (r.mem_latency_cycles, r.dep_delay_coal, r.dep_delay_uncoal, r.issue_cycles):
        assert math.isfinite(value) and value > 0
    assert r.mem_latency_cycles > 1.0
    assert 0.1 < r.bandwidth_gbs < 1000.0
    assert r.cores >= 1 and r.warp_size >= 1 and r.clock_ghz > 0
    n = len(r.raw["warps_per_core"])
    assert len(r.raw["coal_cycles_per_round"]) == len(r.raw["uncoal_cycles_per_round"]) == n
    assert all(c > 0 for c in r.raw["coal_cycles_per_round"] + r.raw["uncoal_cycles_per_round"])


def test_profile_from_microbench(quick_result: MicrobenchResult) -> None:
    r = quick_result
    profile = profile_from_microbench(
        r, r.device_name, "test driver", r.cores, r.warp_size, r.clock_ghz, 8
    )
    assert profile.mem_latency == pytest.approx(r.mem_latency_cycles)
    assert profile.dep_delay_uncoal == pytest.approx(r.dep_delay_uncoal)
    assert profile.transactions_per_uncoal == r.warp_size
    doubled = profile_from_microbench(
        r, r.device_name, "test driver", r.cores, r.warp_size, 2 * r.clock_ghz, 8
    )
    assert doubled.mem_latency == pytest.approx(2 * r.mem_latency_cycles)  # same seconds
    assert doubled.bandwidth_gbs == pytest.approx(r.bandwidth_gbs)


def test_measure_device_profile_bad_index() -> None:
    _device_or_skip()
    with pytest.raises(MicrobenchError, match="99:0"):
        measure_device_profile("99:0", quick=True)
