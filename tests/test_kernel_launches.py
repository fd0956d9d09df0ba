"""Kernel launches chosen per device by measurement: the candidates, the choice, its cache, and
on the device at hand, that the chosen launches render the image the default ones do."""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest

from governed.mesh.calibration_fit import samples_kernels
from governed.mesh.calibration_frames import Sample
from governed.mesh.instruction_counts import counts_fingerprint, kernels_fingerprint
from raytracer.device import launches as kl
from raytracer.device.launches import DEFAULT, KernelLaunches, Launch
from raytracer.mesh.tracer import KERNELS, RenderSettings, Tracer, kernel_source

SG = kl.SUB_GROUP_EXTENSION


class FakeDevice:
    """What device_launches reads of a cl.Device: its extensions and its cache key's fields."""

    def __init__(self, extensions: str) -> None:
        self.extensions = extensions
        self.name, self.driver_version, self.type = "Fake CPU", "1.0", 0

        class Platform:
            name = "Fake platform"

        self.platform = Platform()


def test_candidates_need_the_sub_group_extension():
    assert kl.candidates("cl_khr_fp64 cl_khr_icd") == [DEFAULT]
    found = kl.candidates(f"cl_khr_fp64 {SG} cl_khr_icd")
    assert found[0] == DEFAULT and len(found) == len(set(found)) == 6
    assert {c.sub_group for c in found[:3]} == {0}  # shapes left to the driver come first
    # the device's own SIMD width is the first sub-group size tried (it wins ties)
    assert kl.candidates(SG, simd_width=16)[3] == Launch((16, 4), 16)
    assert [c.sub_group for c in kl.candidates(SG, simd_width=32)[3:]] == [32, 8, 16]
    for launch in found:
        gx, gy = launch.group
        assert gx * gy == 64  # the cost model's threads per block
        assert launch.sub_group == 0 or gx % launch.sub_group == 0  # rows of whole sub-groups
    assert {c.sub_group for c in found} == {0, 8, 16, 32}


def test_packet_forms_are_timed_on_every_device_after_the_rest():
    plain = kl.candidates("cl_khr_icd", packets=((4, 4), (8, 2)))
    assert plain == [DEFAULT, Launch(packet=(4, 4)), Launch(packet=(8, 2))]
    sized = kl.candidates(SG, simd_width=16, packets=((4, 4),))
    assert sized[:-1] == kl.candidates(SG, simd_width=16) and sized[-1] == Launch(packet=(4, 4))


def test_a_packet_is_the_lanes_that_run_together():
    packet = Launch(packet=(4, 2))
    assert packet.lanes(16) == (2, 4)  # rows, columns; the device's own width plays no part
    assert packet.label == "8x8/p4x2" and Launch((16, 4), 16).label == "16x4/sg16"
    assert DEFAULT.lanes(1) == (1, 1) and Launch((16, 4)).lanes(16) == (1, 16)
    # a work-item per packet, in whole work-groups
    assert DEFAULT.work_items(100, 60) == (104, 64)
    assert packet.work_items(100, 60) == (32, 32)  # 25 x 30 packets, groups of 8x8
    assert Launch((16, 4), packet=(4, 4)).work_items(64, 64) == (16, 16)
    for bad in ((3, 1), (4, 8), (0, 2), (-2, -1)):
        with pytest.raises(ValueError, match=f"packet of {bad[0]}x{bad[1]} pixels"):
            Launch(packet=bad)


def test_a_cached_choice_keeps_its_packet(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "one"))
    packet = Launch(packet=(4, 4))
    device = FakeDevice("cl_khr_icd")  # no sub-groups: the packet is the only other candidate

    def measure(options):
        assert options == [DEFAULT, packet]
        return {DEFAULT: {"k": 1.0}, packet: {"k": 0.4}}

    assert kl.device_launches(device, "packets", ("k",), measure, packets=((4, 4),))["k"] == packet
    # another process (another cache folder holding the same file): read, not measured
    (cached,) = (tmp_path / "one" / "launches").iterdir()
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "two"))
    (tmp_path / "two" / "launches").mkdir(parents=True)
    shutil.copy(cached, tmp_path / "two" / "launches" / cached.name)
    got = kl.device_launches(device, "packets", ("k",), lambda o: pytest.fail(), packets=((4, 4),))
    assert got["k"] == packet and got.signature == "k=8x8/p4x4"


def test_pairs_that_do_not_apply_are_never_run_nor_chosen():
    """A packet launch of a kernel without a packet form is not timed, and absent from the
    times, so that kernel keeps the default."""
    packet = Launch(packet=(4, 2))
    ran = []

    def run(launch: Launch, kernel: str) -> float:
        ran.append((launch, kernel))
        return 1.0 if launch == DEFAULT else 0.1

    times = kl.time_rounds([DEFAULT, packet], ("a", "b"), run,
                           lambda launch, kernel: launch == DEFAULT or kernel == "a")
    assert (packet, "b") not in ran and (packet, "a") in ran
    assert set(times[packet]) == {"a"} and set(times[DEFAULT]) == {"a", "b"}
    chosen = kl.choose_all(("a", "b"), times)
    assert chosen["a"] == packet and chosen["b"] == DEFAULT


def test_sub_group_attribute_goes_on_the_named_kernels_only():
    source = kernel_source()
    out = kl.with_sub_groups(source, {"shade": 16, "primary": 0})
    assert out.count("intel_reqd_sub_group_size") == 1
    assert "__kernel __attribute__((intel_reqd_sub_group_size(16))) void shade(" in out
    assert out.replace("__attribute__((intel_reqd_sub_group_size(16))) ", "") == source
    assert kl.with_sub_groups(source, {}) == source
    with pytest.raises(ValueError, match="'k' is defined 2 times"):
        kl.with_sub_groups("__kernel void k(int a) {}\n__kernel void k(int b) {}", {"k": 8})


def test_choice_keeps_the_earlier_launch_unless_clearly_slower():
    a, b, c = DEFAULT, Launch((16, 4), 16), Launch((32, 2), 16)
    assert kl.choose({a: 1.0, b: 0.95, c: 0.83}) == a  # within the margin: noise
    assert kl.choose({a: 1.0, b: 0.40, c: 0.38}) == b  # a near tie later: the earlier one
    assert kl.choose({a: 1.0, b: 0.40, c: 0.30}) == c
    assert kl.choose({a: 0.05, b: 0.6, c: math.inf}) == a
    assert kl.choose({b: 0.5, c: 0.2}) == c  # the default did not run
    assert kl.choose({}) == DEFAULT
    launches = kl.choose_all(("x", "y"), {a: {"x": 1.0, "y": 1.0}, b: {"x": 0.5, "y": 1.2}})
    assert launches["x"] == b and launches["y"] == a and launches["z"] == DEFAULT
    assert launches.signature == "x=16x4/sg16"
    assert KernelLaunches({"x": a}).signature == ""


def test_choice_is_measured_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "one"))
    fast = Launch((16, 4), 16)
    calls = []

    def measure(options):
        calls.append(list(options))
        return {o: {"k": 1.0 if o != fast else 0.25, "j": 1.0} for o in options}

    device = FakeDevice(f"cl_khr_icd {SG}")
    got = kl.device_launches(device, "source A", ("k", "j"), measure)
    assert got["k"] == fast and got["j"] == DEFAULT and len(calls) == 1
    assert calls[0] == kl.candidates(device.extensions)
    assert kl.device_launches(device, "source A", ("k", "j"), measure) is got  # memo
    (cached,) = (tmp_path / "one" / "launches").iterdir()
    doc = json.loads(cached.read_text())
    assert doc["launches"]["k"] == {"group": [16, 4], "sub_group": 16, "packet": [1, 1]}
    assert doc["seconds"]["16x4/sg16"]["k"] == 0.25  # the times that chose it
    # another process (another cache folder holding the same file): read, not measured
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "two"))
    (tmp_path / "two" / "launches").mkdir(parents=True)
    shutil.copy(cached, tmp_path / "two" / "launches" / cached.name)
    assert kl.device_launches(device, "source A", ("k", "j"), measure).by_kernel == got.by_kernel
    assert len(calls) == 1
    # another kernel source, or a corrupt file: measured again
    kl.device_launches(device, "source B", ("k", "j"), measure)
    assert len(calls) == 2
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path / "three"))
    (tmp_path / "three" / "launches").mkdir(parents=True)
    (tmp_path / "three" / "launches" / cached.name).write_text("{not json")
    kl.device_launches(device, "source A", ("k", "j"), measure)
    assert len(calls) == 3


def test_a_device_without_the_extension_measures_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOTUNE_CACHE_DIR", str(tmp_path))
    got = kl.device_launches(FakeDevice("cl_khr_icd"), "s", ("k",), lambda o: pytest.fail())
    assert got["k"] == DEFAULT and not any(tmp_path.iterdir())


def test_calibration_records_the_launches_its_frames_ran_with():
    assert kernels_fingerprint(kl.DEFAULTS) == counts_fingerprint()
    chosen = KernelLaunches({"shade": Launch((16, 4), 16)})
    assert kernels_fingerprint(chosen) == counts_fingerprint() + " shade=16x4/sg16"
    assert kernels_fingerprint(chosen, ["-cl-fast-relaxed-math", "-DINLINE_MATH"]) == (
        counts_fingerprint() + " shade=16x4/sg16 build=cl-fast-relaxed-math+DINLINE_MATH")
    sample = Sample(None, RenderSettings(), {})
    assert samples_kernels([sample]) == counts_fingerprint()  # samples that record none
    tagged = [Sample(None, RenderSettings(), {}, kernels=k) for k in ("a", "a", "")]
    assert samples_kernels(tagged) == "a"
    with pytest.raises(ValueError, match="different kernels"):
        samples_kernels(tagged + [Sample(None, RenderSettings(), {}, kernels="b")])


def test_chosen_launches_render_the_default_image(tracers):
    """Whatever this device chose (sub-groups, other group shapes), the image, hits and
    phase set are the default launches' exactly (a packet form traces its rays together and
    may resolve equal-distance ties otherwise: test_ray_packets.py)."""
    measured = tracers("dragon-small")
    assert set(measured.launches.by_kernel) <= set(KERNELS)
    chosen = Tracer(measured.scene, measured.bvh, launches=KernelLaunches(
        {k: v for k, v in measured.launches.by_kernel.items() if v.packet == (1, 1)}))
    plain = Tracer(chosen.scene, chosen.bvh, launches=kl.DEFAULTS)
    settings = RenderSettings(3, 0.1, True, True)
    cam = chosen.scene.camera
    a = chosen.render(cam, 100, 60, settings, seed=3)  # sizes not multiples of any group
    b = plain.render(cam, 100, 60, settings, seed=3)
    assert np.array_equal(a.image, b.image)
    assert np.array_equal(chosen.hits().view(np.uint32), plain.hits().view(np.uint32))  # bits
    assert a.phase_seconds.keys() == b.phase_seconds.keys()


def test_a_short_kernel_is_timed_until_enough_of_it_has_run():
    """One timing repeats a kernel shorter than MIN_TIMED and keeps its fastest run, so that a
    single slow run of a 2-ms kernel does not decide between two shapes; a long kernel runs
    once per round, and the warm-up round runs each pair once."""
    short = iter([0.003, 0.002, 0.004] + [0.005] * 100)
    calls = []

    def run(launch: Launch, kernel: str) -> float:
        calls.append(kernel)
        return next(short) if kernel == "short" else 0.05

    assert kl.repeated(run, DEFAULT, "short") == 0.002
    assert len(calls) == 6  # 3 + 2 + 4 + 5 + 5 + 5 ms: 24 >= 20
    calls.clear()
    tiny = []
    assert kl.repeated(lambda launch, kernel: tiny.append(1) or 1e-6, DEFAULT, "tiny") == 1e-6
    assert len(tiny) == kl.MAX_REPEATS
    times = kl.time_rounds([DEFAULT], ("short", "long"), run)
    assert times[DEFAULT] == {"short": 0.005, "long": 0.05}
    assert calls.count("long") == kl.ROUNDS + 1
    assert calls.count("short") == 1 + kl.ROUNDS * 4  # 4 x 5 ms per timed round
