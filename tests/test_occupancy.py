"""CUDA occupancy rules on hand-checked launches (cc 9.0 H100/H200, cc 7.5, cc 8.6)."""

from __future__ import annotations

import dataclasses

import pytest

from models.occupancy import GpuLimits, Occupancy, limits_for_compute_capability, occupancy

H200 = limits_for_compute_capability(9, 0)


def test_hopper_limits() -> None:
    assert (H200.max_warps_per_sm, H200.max_blocks_per_sm) == (64, 32)
    assert (H200.registers_per_sm, H200.max_registers_per_thread) == (65536, 255)
    assert H200.shared_per_sm == 228 * 1024 and H200.shared_per_block_max == 227 * 1024
    assert H200.reserved_shared_per_block == 1024


def test_block_limited() -> None:
    # 2 warps/block: warps allow 32 blocks, registers 65536 / (1024 * 2) = 32, the block cap
    # 32 too; a tie names the block cap.
    assert occupancy(H200, 64, 32, 0) == Occupancy(32, 64, 1.0, "blocks")


def test_register_limited() -> None:
    # 128 regs -> 4096 per warp, 8 warps/block -> 32768 per block -> 2 blocks, 16 warps.
    assert occupancy(H200, 256, 128, 0) == Occupancy(2, 16, 0.25, "registers")


def test_register_rounding_to_allocation_unit() -> None:
    # 33 regs * 32 = 1056 -> 1280 per warp; 4 warps/block -> 65536 // 5120 = 12 blocks.
    occ = occupancy(H200, 128, 33, 0)
    assert (occ.active_blocks, occ.active_warps, occ.limiter) == (12, 48, "registers")


def test_shared_limited() -> None:
    # 48 KiB + 1 KiB reserved = 49 KiB per block; 228 // 49 = 4 blocks of 4 warps.
    occ = occupancy(H200, 128, 32, 48 * 1024)
    assert occ == Occupancy(4, 16, 0.25, "shared")
    # Rounded to the 128-byte unit: 1000 + 1024 -> 2048 bytes -> 114 blocks, so not limiting.
    assert occupancy(H200, 32, None, 1000).limiter == "blocks"


def test_warp_limited_and_partial_warps() -> None:
    occ = occupancy(H200, 1024, None, 0)  # 32 warps per block: 2 blocks fill 64 warps
    assert occ == Occupancy(2, 64, 1.0, "warps")
    assert occupancy(H200, 33, None, 0).active_warps == 64  # 33 threads take 2 warps


def test_turing_limits() -> None:
    turing = limits_for_compute_capability(7, 5)
    assert turing.max_warps_per_sm == 32 and turing.max_blocks_per_sm == 16
    assert turing.reserved_shared_per_block == 0
    assert occupancy(turing, 64, None, 0) == Occupancy(16, 32, 1.0, "blocks")
    assert occupancy(turing, 32, None, 0) == Occupancy(16, 16, 0.5, "blocks")


def test_ampere_consumer_limits() -> None:
    ga10x = limits_for_compute_capability(8, 6)
    # 48 warps, 16 blocks: 64-thread blocks stop at 16 blocks = 32 warps (2/3 occupancy).
    occ = occupancy(ga10x, 64, None, 0)
    assert (occ.active_blocks, occ.limiter) == (16, "blocks")
    assert occ.occupancy == pytest.approx(32 / 48)


def test_block_that_does_not_fit() -> None:
    occ = occupancy(H200, 1024, 255, 0)  # 255 regs -> 8192/warp x 32 warps > 65536
    assert (occ.active_blocks, occ.active_warps, occ.limiter) == (0, 0, "registers")


@pytest.mark.parametrize(("args", "name"), [
    ((0, 32, 0), "threads_per_block = 0"),
    ((1025, 32, 0), "threads_per_block = 1025"),
    ((64, 256, 0), "registers_per_thread = 256"),
    ((64, -1, 0), "registers_per_thread = -1"),
    ((64, 32, 228 * 1024), "shared_bytes_per_block = 233472"),
    ((64.0, 32, 0), "threads_per_block must be an integer"),
])
def test_invalid_inputs(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        occupancy(H200, *args)


def test_unknown_compute_capability() -> None:
    with pytest.raises(ValueError, match=r"compute capability 10\.0 .*9\.0"):
        limits_for_compute_capability(10, 0)


def test_limits_validated() -> None:
    with pytest.raises(ValueError, match="max_warps_per_sm"):
        dataclasses.replace(H200, max_warps_per_sm=0)
    assert isinstance(dataclasses.replace(H200, reserved_shared_per_block=0), GpuLimits)
