"""Each phase's occupancy from its compiled kernel's registers (issue: occupancy from the
kernel's resource use, not a guess). No GPU here: NVIDIA's build log is stood in for by the
figures an H200 reported (primary 116 registers, shadow 111, ao 113, shade 32)."""

from __future__ import annotations

import pytest

import governed.mesh.kernel_occupancy as ko
from raytracer.device.choice import DeviceInfo
from raytracer.device.launches import DEFAULTS, KernelLaunches, Launch
from raytracer.device.nvidia import KernelResources
from raytracer.mesh.phases import RAY_PACKET

H200_REGISTERS = {"primary": 116, "shadow": 111, "ao": 113, "shade": 32}
H200_OCCUPANCY = {"primary": 8, "shadow": 9, "ao": 8, "shade": 32}


def _device(runtime: str, kind: str = "GPU") -> DeviceInfo:
    return DeviceInfo(0, 0, "test", "NVIDIA H200", kind, 132, 1980, 143000, "570.00", 32,
                      runtime=runtime)


@pytest.mark.parametrize("runtime", ["pocl", "intel-cpu", "", "amd"])
def test_no_occupancy_off_nvidia_and_nothing_is_built(monkeypatch, runtime):
    def fail(*args, **kwargs):
        raise AssertionError("nothing is built or queried off NVIDIA")

    monkeypatch.setattr(ko, "choose_device", fail)
    monkeypatch.setattr(ko, "kernel_resources", fail)
    assert ko.kernel_occupancy(_device(runtime, "CPU")) is None


@pytest.fixture
def nvidia(monkeypatch):
    """kernel_occupancy's OpenCL calls replaced: ``builds`` records each build's options and
    returns the next of ``logs`` (entry -> registers)."""
    state = {"capability": (9, 0), "logs": [H200_REGISTERS], "builds": []}

    def resources(source, options, context, device):
        state["builds"].append(list(options))
        log = state["logs"][min(len(state["builds"]), len(state["logs"])) - 1]
        return {name: KernelResources(registers=log.get(name), shared_bytes=0)
                for name in ("primary", "shadow", "ao", "shade", "primary_packet",
                             "shadow_packet")}

    monkeypatch.setattr(ko, "choose_device", lambda spec: (None, "device"))
    monkeypatch.setattr(ko, "compute_capability", lambda device: state["capability"])
    monkeypatch.setattr(ko, "kernel_resources", resources)
    monkeypatch.setattr(ko.cl, "Context", lambda devices: "context")
    return state


def test_h200_registers_give_the_cuda_occupancy(nvidia):
    assert ko.kernel_occupancy(_device("nvidia"), DEFAULTS) == H200_OCCUPANCY
    assert len(nvidia["builds"]) == 1 and "-cl-fast-relaxed-math" in nvidia["builds"][0]


def test_the_device_launches_pick_the_entry(nvidia, monkeypatch):
    """A phase launched in packets runs its packet kernel: that entry's registers count."""
    nvidia["logs"] = [H200_REGISTERS | {"primary_packet": 200}]
    packets = KernelLaunches({"primary": Launch(packet=RAY_PACKET)})
    monkeypatch.setattr(ko, "device_launches", lambda *args, **kwargs: packets)
    got = ko.kernel_occupancy(_device("nvidia"))
    assert got == H200_OCCUPANCY | {"primary": 5}  # 200 registers: 5 groups of 64


def test_a_cached_build_that_logs_nothing_is_built_again(nvidia):
    nvidia["logs"] = [{}, H200_REGISTERS]
    assert ko.kernel_occupancy(_device("nvidia"), DEFAULTS) == H200_OCCUPANCY
    first, second = nvidia["builds"]
    assert len(second) == len(first) + 1 and second[-1].startswith("-D")


def test_a_phase_without_registers_is_left_out_with_a_warning(nvidia):
    nvidia["logs"] = [{k: v for k, v in H200_REGISTERS.items() if k != "ao"}]
    with pytest.warns(UserWarning, match=r"occupancy of ao \(ao\) on NVIDIA H200 is unknown"):
        got = ko.kernel_occupancy(_device("nvidia"), DEFAULTS)
    assert got == {k: v for k, v in H200_OCCUPANCY.items() if k != "ao"}


@pytest.mark.parametrize(("capability", "why"), [(None, "no compute capability"),
                                                 ((1, 0), "not in the occupancy table")])
def test_an_unknown_capability_gives_none_with_a_warning(nvidia, capability, why):
    nvidia["capability"] = capability
    with pytest.warns(UserWarning, match=why):
        assert ko.kernel_occupancy(_device("nvidia"), DEFAULTS) is None
