"""NVIDIA device figures, ptxas logs, driver PTX counted like clang's, and their comparison."""

from __future__ import annotations

from pathlib import Path

import pyopencl as cl
import pytest

from governed.mesh.instruction_counts import load_kernel_counts
from models.raytrace_cost import LoopCounts
from raytracer.device.choice import DeviceError, build_quietly, choose_device
from raytracer.device.nvidia import (
    KernelResources,
    NvidiaFiguresError,
    compare_counts,
    compute_capability,
    driver_ptx,
    kernel_resources,
    nvidia_device_figures,
    parse_ptxas_log,
)
from tools.ptx_analysis import count_ptx

DRIVER_PTX = Path(__file__).parent / "data" / "nvidia_driver.ptx"

# An NVIDIA OpenCL build log with -cl-nv-verbose (ptxas --verbose), CUDA 12 style: a device
# function listed apart with its own stack, a kernel using shared memory and spilling, one
# "used N barriers" field, a kernel without smem, and lines of other kinds in between.
PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for intersect_leaf
    48 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'trace_primary' for 'sm_90'
ptxas info    : Function properties for trace_primary
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem, 380 bytes cmem[0]
ptxas info    : Compile time = 12.345 ms
ptxas warning : Registers are spilled to local memory in function 'trace_primary'
ptxas info    : Compiling entry function 'shade' for 'sm_90'
ptxas info    : Function properties for shade
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 28 registers, 372 bytes cmem[0], 8 bytes cmem[2]\r
"""


def test_parse_ptxas_log() -> None:
    res = parse_ptxas_log(PTXAS_LOG)
    assert set(res) == {"trace_primary", "shade"}  # the device function is no kernel
    assert res["trace_primary"] == KernelResources(40, 1024, 256, 8, 12)
    assert res["shade"] == KernelResources(28, 0, 0, 0, 0)  # no smem field: none used


def test_parse_ptxas_log_variations() -> None:
    old = ("ptxas info    : Compiling entry function 'k' for 'sm_13'\n"
           "ptxas info    : Used 10 registers, 8+0 bytes lmem, 24+16 bytes smem, 4 bytes cmem[1]\n")
    assert parse_ptxas_log(old)["k"] == KernelResources(registers=10, shared_bytes=40)
    dotted = ("ptxas info    : Compiling entry function 'k' for 'sm_86'\n"
              "ptxas info    : Function properties for k\n"
              "ptxas         .     16 bytes stack frame, 4 bytes spill stores, "
              "4 bytes spill loads\n"
              "ptxas info    : Used 4 registers, 344 bytes cmem[0]\n")
    assert parse_ptxas_log(dotted)["k"] == KernelResources(4, 0, 16, 4, 4)
    only_entry = "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
    assert parse_ptxas_log(only_entry)["k"] == KernelResources()  # nothing else reported
    assert parse_ptxas_log("") == {}
    assert parse_ptxas_log("build succeeded, no ptxas output") == {}


def test_driver_style_ptx_counts() -> None:
    counts = count_ptx(DRIVER_PTX.read_text())
    # Region by region as the file's comments mark them.
    assert counts["primary"] == LoopCounts(i_ct=19, i_cco=20, i_mt=5, i_mco=2)
    assert counts["shade"] == LoopCounts(i_cco=11, i_mco=2)


def test_compare_counts() -> None:
    driver = count_ptx(DRIVER_PTX.read_text())
    clang = load_kernel_counts()
    table = compare_counts(driver, clang)
    assert set(table) == set(driver) | set(clang)
    row = table["primary"]["i_ct"]
    assert row == {"driver": 19.0, "clang": clang["primary"].i_ct,
                   "ratio": pytest.approx(19.0 / clang["primary"].i_ct)}
    assert table["shade"]["i_ct"]["ratio"] is None  # clang's is 0: no ratio
    assert table["ao"]["i_cco"] == {"driver": None, "clang": clang["ao"].i_cco, "ratio": None}
    assert list(table["primary"]) == ["i_ct", "i_ci", "i_cco", "i_mt", "i_mi", "i_mco"]
    # JSON documents' phases (mappings) compare like LoopCounts.
    assert compare_counts({"k": {"i_cco": 3}}, {"k": LoopCounts(i_cco=2)})["k"]["i_cco"] == {
        "driver": 3.0, "clang": 2.0, "ratio": 1.5}


class FakeDevice:
    """A device answering ``get_info`` from a table; anything else fails like OpenCL does."""

    def __init__(self, extensions: str, answers: dict[int, object]) -> None:
        self.extensions = extensions
        self.answers = answers

    def get_info(self, code: int) -> object:
        if code not in self.answers:
            raise cl.LogicError(f"clGetDeviceInfo 0x{code:x}: INVALID_VALUE")
        return self.answers[code]


STANDARD = {
    cl.device_info.NAME: "Fake GPU ",
    cl.device_info.MAX_COMPUTE_UNITS: 132,
    cl.device_info.MAX_CLOCK_FREQUENCY: 1980,
    cl.device_info.GLOBAL_MEM_SIZE: 150 << 30,
    cl.device_info.LOCAL_MEM_SIZE: 48 << 10,
    cl.device_info.MAX_WORK_GROUP_SIZE: 1024,
}


def test_figures_without_the_extension() -> None:
    figures = nvidia_device_figures(FakeDevice("cl_khr_fp64", STANDARD))
    assert figures["name"] == "Fake GPU" and figures["sms"] == 132
    assert figures["clock_mhz"] == 1980 and figures["max_work_group_size"] == 1024
    assert figures["nv_attribute_query"] is False
    assert figures["compute_capability_major"] is None and figures["warp_size"] is None
    assert "cl_nv_device_attribute_query" in figures["missing"]["warp_size"]
    assert "name" not in figures["missing"]
    assert compute_capability(FakeDevice("cl_khr_fp64", STANDARD)) is None


def test_figures_with_the_extension_and_a_failing_query() -> None:
    answers = {**STANDARD, 0x4000: 9, 0x4001: 0, 0x4002: 65536, 0x4003: 32, 0x4004: 1,
               0x4005: 0}  # 0x4006 (integrated memory) fails
    del answers[cl.device_info.MAX_CLOCK_FREQUENCY]
    device = FakeDevice("cl_khr_fp64 cl_nv_device_attribute_query", answers)
    figures = nvidia_device_figures(device)
    assert (figures["compute_capability_major"], figures["compute_capability_minor"]) == (9, 0)
    assert figures["registers_per_block"] == 65536 and figures["warp_size"] == 32
    assert figures["gpu_overlap"] is True and figures["kernel_exec_timeout"] is False
    assert figures["integrated_memory"] is None and figures["clock_mhz"] is None
    assert set(figures["missing"]) == {"integrated_memory", "clock_mhz"}
    assert "0x4006" in figures["missing"]["integrated_memory"]
    assert compute_capability(device) == (9, 0)


KERNELS = """
__kernel void stage(__global const float* a, __global float* b) {
    __local float tile[64];
    tile[get_local_id(0)] = a[get_global_id(0)];
    barrier(CLK_LOCAL_MEM_FENCE);
    b[get_global_id(0)] = tile[63 - get_local_id(0)];
}
__kernel void copy(__global const float* a, __global float* b) {
    b[get_global_id(0)] = a[get_global_id(0)];
}
"""


@pytest.fixture(scope="module")
def opencl():
    try:
        _, device = choose_device()
    except DeviceError as exc:
        pytest.skip(f"no OpenCL device: {exc}")
    return cl.Context([device]), device


def test_real_device_figures_and_resources(opencl) -> None:
    context, device = opencl
    figures = nvidia_device_figures(device)
    assert figures["sms"] == device.max_compute_units
    nv = "cl_nv_device_attribute_query" in device.extensions
    assert figures["nv_attribute_query"] is nv
    res = kernel_resources(KERNELS, [], context, device)
    assert set(res) == {"stage", "copy"}
    assert res["stage"].shared_bytes >= 64 * 4
    assert res["copy"].stack_bytes is not None
    if "cl_nv_compiler_options" in device.extensions:
        assert res["copy"].registers is not None  # from the ptxas log


def test_driver_ptx_on_the_device(opencl) -> None:
    context, device = opencl
    program = build_quietly(cl.Program(context, KERNELS), [])
    if "nvidia" in device.platform.name.lower():
        text = driver_ptx(program)
        assert ".entry stage" in text and set(count_ptx(text)) == {"stage", "copy"}
    else:
        with pytest.raises(NvidiaFiguresError, match="not PTX text"):
            driver_ptx(program)


def test_kernel_resources_build_failure(opencl) -> None:
    context, device = opencl
    with pytest.raises(NvidiaFiguresError, match="kernel build failed"):
        kernel_resources("__kernel void broken( {", [], context, device)
