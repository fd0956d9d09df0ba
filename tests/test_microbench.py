"""Departure-delay fit on synthetic curves; quick microbenchmarks on a real OpenCL device."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raytracer.opencl_device import DeviceError, choose_device
from raytracer.tuning.microbench import (
    MicrobenchError,
    MicrobenchResult,
    fit_departure_delay,
    measure_device_profile,
    profile_from_microbench,
    run_microbench,
)


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
