"""Every CPU runtime pip installed is visible, a device that cannot build is never the default,
and each device's SIMD width and clock are measured, with their sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from common.cache_folder import CACHE_ENV
from raytracer.device import choice as od
from raytracer.device import runtimes as rt
from raytracer.device.choice import DeviceError, DeviceInfo
from raytracer.device.traits import device_traits, measure_clock_mhz, os_clock_mhz


def _info(p: int, kind: str, runtime: str, builds: bool = True, name: str = "dev") -> DeviceInfo:
    return DeviceInfo(p, 0, f"platform {p}", name, kind, 2, 2600, 1024, "1.0",
                      1 if runtime == "pocl" else 16, runtime, "test", "test", builds,
                      "" if builds else "error: unknown target CPU 'generic'")


# ---------------------------------------------------------------- registration with the loader


def test_a_mounted_gpu_driver_library_without_its_icd_is_registered(tmp_path):
    """A container that mounts the NVIDIA driver but no nvidia.icd: the library is found on
    $LD_LIBRARY_PATH (before the usual folders) and gets an .icd of its own; one an existing
    .icd already names is left to the loader."""
    mount = tmp_path / "nvidia" / "lib64"
    mount.mkdir(parents=True)
    (mount / "libnvidia-opencl.so.1").write_bytes(b"\x7fELF")
    folders = rt.driver_search_folders({"LD_LIBRARY_PATH": f"{mount}:/nowhere"})
    assert folders[0] == mount and Path("/usr/local/nvidia/lib64") in folders
    found = rt.driver_libraries({}, folders)
    assert found == {"nvidia": mount / "libnvidia-opencl.so.1"}
    assert rt.vendor_files(found, {}) == {
        "autotune-nvidia.icd": f"{mount / 'libnvidia-opencl.so.1'}\n"}
    assert rt.driver_libraries({"nvidia.icd": "libnvidia-opencl.so.1\n"}, folders) == {}
    assert rt.driver_libraries({}, [tmp_path / "empty"]) == {}


def test_vendor_folder_keeps_what_the_loader_had(tmp_path):
    system = tmp_path / "etc"
    system.mkdir()
    (system / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    lib = tmp_path / "lib" / "libintelocl.so"
    files = rt.vendor_files({"intel-opencl-rt": lib}, rt.existing_icds({}, system))
    assert files == {"nvidia.icd": "libnvidia-opencl.so.1\n",
                     "autotune-intel-opencl-rt.icd": f"{lib}\n"}
    folder = rt.write_vendor_folder(files, tmp_path / "cache")
    assert sorted(p.name for p in folder.iterdir()) == sorted(files)
    assert rt.write_vendor_folder(files, tmp_path / "cache") == folder  # same contents, reused
    assert not list((tmp_path / "cache").glob(".opencl-vendors-*"))  # no staging left


def test_user_vendors_folder_or_file_is_kept(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "a.icd").write_text("/opt/a/libA.so\n")
    assert rt.existing_icds({rt.VENDORS_ENV: str(user)}) == {"a.icd": "/opt/a/libA.so\n"}
    assert rt.existing_icds({rt.VENDORS_ENV: str(user / "a.icd")}) == {"a.icd": "/opt/a/libA.so\n"}
    assert rt.existing_icds({rt.VENDORS_ENV: str(tmp_path / "missing")}) == {}


def test_a_system_intel_runtime_is_not_registered_twice(tmp_path):
    existing = {"intel.icd": "/opt/intel/lib/libintelocl.so\n"}
    files = rt.vendor_files({"intel-opencl-rt": tmp_path / "libintelocl.so"}, existing)
    assert files == existing


FRESH_PROCESS = """
import json, os
import raytracer
names = ("OCL_ICD_VENDORS", "POCL_WORK_GROUP_METHOD")
imported = {n: os.environ.get(n) for n in names}
files = os.listdir(os.environ["AUTOTUNE_CACHE_DIR"])
platforms = sorted({d.platform for d in raytracer.list_devices()})
listed = {n: os.environ.get(n) for n in names}
print(json.dumps([imported, files, listed, platforms]))
"""


def test_importing_raytracer_sets_nothing_up_and_the_first_device_query_does(tmp_path):
    """`import raytracer` writes no file and sets no variable; listing the devices readies the
    runtimes first (what a user gets after `pip install`: nothing set by hand, every pip runtime
    listed, PoCL compiling with work-item loops)."""
    env = {k: v for k, v in os.environ.items() if k not in (rt.VENDORS_ENV, rt.POCL_METHOD_ENV)}
    env[CACHE_ENV] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], env=env, capture_output=True,
                         text=True, check=True).stdout
    imported, files, listed, platforms = json.loads(out)
    assert imported == {rt.VENDORS_ENV: None, rt.POCL_METHOD_ENV: None} and files == []
    assert listed[rt.POCL_METHOD_ENV] == rt.POCL_METHOD
    if not rt.pip_runtime_libraries():
        return  # no pip-installed OpenCL runtime to register on this platform
    assert Path(listed[rt.VENDORS_ENV]).parent == tmp_path
    assert "Intel(R) OpenCL" in platforms and "Portable Computing Language" in platforms


def test_runtimes_are_prepared_once_per_process(monkeypatch):
    calls = []
    monkeypatch.setattr(rt, "_prepared", False)
    for name in ("register_pip_runtimes", "limit_cpu_threads", "pocl_work_group_method"):
        monkeypatch.setattr(rt, name, lambda name=name: calls.append(name))
    rt.prepare_runtimes()
    rt.prepare_runtimes()
    assert calls == ["register_pip_runtimes", "limit_cpu_threads", "pocl_work_group_method"]


def test_compute_units_reach_each_cpu_runtime_as_its_thread_limit():
    env = {rt.COMPUTE_UNITS_ENV: "1"}
    rt.limit_cpu_threads(env)
    assert env["POCL_MAX_PTHREAD_COUNT"] == env["DPCPP_CPU_NUM_CUS"] == "1"
    env = {"POCL_MAX_PTHREAD_COUNT": "3"}
    rt.limit_cpu_threads(env)
    assert env == {"POCL_MAX_PTHREAD_COUNT": "3"}  # untouched without a request


def test_pocl_compiles_with_work_item_loops_unless_the_user_chose_a_method():
    env: dict[str, str] = {}
    rt.pocl_work_group_method(env)
    assert env == {rt.POCL_METHOD_ENV: "loops"}
    env = {rt.POCL_METHOD_ENV: "loopvec"}
    rt.pocl_work_group_method(env)
    assert env == {rt.POCL_METHOD_ENV: "loopvec"}


# ---------------------------------------------------------------- default choice


def test_default_prefers_gpu_then_cpu_runtime_order():
    infos = [_info(0, "CPU", "pocl"), _info(1, "CPU", "intel-cpu"), _info(2, "GPU", "nvidia")]
    assert od.pick_default(infos).runtime == "nvidia"
    assert od.pick_default(infos[:2]).runtime == od.CPU_RUNTIME_PREFERENCE[0]


def test_a_device_that_cannot_build_is_skipped_with_a_warning():
    od._warned.clear()
    infos = [_info(0, "CPU", "intel-cpu", builds=False, name="broken"), _info(1, "CPU", "pocl")]
    with pytest.warns(UserWarning, match=r"skipping OpenCL device 0:0 broken .*cannot build "
                                         r"kernels here \(error: unknown target CPU"):
        assert od.pick_default(infos).runtime == "pocl"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        od.pick_default(infos)  # said once per process


def test_no_device_that_builds_is_one_clear_error():
    with pytest.raises(DeviceError, match="no OpenCL device here can build kernels.*generic"):
        od.pick_default([_info(0, "CPU", "pocl", builds=False)])


def test_forcing_a_device_that_cannot_build_names_it_and_the_way_out(monkeypatch):
    fake = [(_info(0, "CPU", "intel-cpu", name="good"), object()),
            (_info(1, "CPU", "pocl", builds=False, name="pthread-cpu"), object())]
    monkeypatch.setattr(od, "_all_devices", lambda: fake)
    monkeypatch.delenv(od.DEVICE_ENV, raising=False)
    monkeypatch.delenv(rt.COMPUTE_UNITS_ENV, raising=False)
    with pytest.raises(DeviceError, match=r"1:0 pthread-cpu .*cannot build kernels here: error: "
                                          r"unknown target CPU 'generic'; choose another .*0:0"):
        od.choose_device("pocl")
    monkeypatch.setenv(od.DEVICE_ENV, "1:0")
    with pytest.raises(DeviceError, match="1:0 pthread-cpu"):
        od.choose_device()
    assert od.choose_device("cpu")[0].name == "good"  # a kind picks one that builds
    monkeypatch.setenv(rt.COMPUTE_UNITS_ENV, "zero")
    with pytest.raises(DeviceError, match="AUTOTUNE_COMPUTE_UNITS must be a positive integer"):
        od.choose_device("0:0")


def test_the_cores_share_of_a_process_does_not_cut_a_gpu(monkeypatch):
    """$AUTOTUNE_COMPUTE_UNITS splits a machine's cores between MPI ranks: a volume rank on a
    16-core GPU machine once asked the H200 to be cut to 16 SMs, which its driver refused."""
    gpu = _info(0, "GPU", "nvidia", name="NVIDIA H200")
    gpu = replace(gpu, compute_units=132)

    cuts = []

    class Device:
        def create_sub_devices(self, properties):
            cuts.append(properties)
            raise AttributeError("no fission here")

    monkeypatch.setattr(od, "_all_devices", lambda: [(gpu, Device())])
    monkeypatch.delenv(od.DEVICE_ENV, raising=False)
    monkeypatch.setenv(rt.COMPUTE_UNITS_ENV, "16")
    assert od.choose_device()[0].compute_units == 132
    assert od.choose_device("gpu")[0].compute_units == 132
    assert cuts == []
    with pytest.raises(DeviceError, match="cannot be cut to 16 compute units"):
        od.choose_device("gpu", compute_units=16)  # asked for by the caller: tried, refused
    assert len(cuts) == 1


def test_a_runtime_named_picks_one_of_its_devices_that_builds(monkeypatch):
    """Two PoCLs (pip's, which cannot build on a CPU its LLVM does not know, and the
    system's): ``pocl`` names the one that builds, whichever the loader lists first."""
    fake = [(_info(0, "CPU", "pocl", builds=False, name="pip-pocl"), object()),
            (_info(1, "CPU", "intel-cpu"), object()),
            (_info(2, "CPU", "pocl", name="system-pocl"), object())]
    monkeypatch.setattr(od, "_all_devices", lambda: fake)
    monkeypatch.delenv(od.DEVICE_ENV, raising=False)
    monkeypatch.delenv(rt.COMPUTE_UNITS_ENV, raising=False)
    assert od.choose_device("pocl")[0].name == "system-pocl"
    with pytest.raises(DeviceError, match="0:0 pip-pocl"):
        od.choose_device("0:0")  # asked for by index: that device, with its error


# ---------------------------------------------------------------- measured traits


def test_listed_devices_say_whether_they_build_and_where_figures_come_from():
    infos = od.list_devices()
    for info in infos:
        line = info.describe()
        assert info.spec in line and info.runtime in line
        assert ("builds" in line) if info.builds else (f"cannot build here: {info.build_error}"
                                                       in line)
        if info.builds and info.kind == "CPU":
            assert info.clock_mhz > 0 and info.clock_source
            assert info.simd_source.startswith("measured")
    by_runtime = {i.runtime: i for i in infos if i.builds}
    if "pocl" in by_runtime:
        assert by_runtime["pocl"].simd_width == 1  # one work-item at a time
    if "intel-cpu" in by_runtime:
        import pyopencl as cl

        dev = cl.get_platforms()[by_runtime["intel-cpu"].platform_index].get_devices()[0]
        assert by_runtime["intel-cpu"].simd_width == dev.native_vector_width_float


def test_traits_are_cached_per_device(tmp_path, monkeypatch):
    import pyopencl as cl

    from raytracer.device import traits as dt

    info, dev = od.choose_device()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(dt, "_memo", {})
    first = device_traits(dev)
    files = list((tmp_path / "devices").glob("*.json"))
    assert len(files) == 1 and dt.traits_key(dev) in files[0].name
    monkeypatch.setattr(dt, "_memo", {})
    monkeypatch.setattr(dt, "measure_traits", lambda d: pytest.fail("measured again"))
    assert device_traits(dev) == first
    files[0].write_text("{not json")  # a corrupt cache is measured again, not trusted
    monkeypatch.setattr(dt, "_memo", {})
    monkeypatch.setattr(dt, "measure_traits", lambda d: replace(first, simd_width=3))
    assert device_traits(dev).simd_width == 3
    assert isinstance(dev, cl.Device) and info.builds


def test_clock_from_the_os_and_measured():
    mhz, source = os_clock_mhz()
    if mhz:
        assert 100 < mhz < 10_000 and source.startswith("OS: ")
    measured = measure_clock_mhz(iterations=3_000_000)
    assert 300 < measured < 10_000  # a broken chain (folded away, or counted wrong) is far off


def test_one_compute_unit_runs_kernels_on_one_core(tmp_path):
    """AUTOTUNE_COMPUTE_UNITS=1 in a fresh process: the kernels' CPU time stays at their wall
    time (one thread), where all cores took about twice that."""
    info, _ = od.choose_device()
    if info.kind != "CPU" or info.compute_units < 2:
        pytest.skip("needs a CPU device of several compute units")
    code = ("import time, raytracer as r; s = r.load_scene('spheres'); t = r.Tracer(s); "
            "st = r.RenderSettings(ao_rays=16); t.render(s.camera, 320, 180, st); "
            "w, c = time.perf_counter(), time.process_time(); "
            "[t.render(s.camera, 320, 180, st) for _ in range(4)]; "
            "print(t.device.compute_units, (time.process_time() - c) / "
            "(time.perf_counter() - w))")
    env = {**os.environ, rt.COMPUTE_UNITS_ENV: "1"}
    for key in rt.THREAD_LIMIT_ENV.values():
        env.pop(key, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "1"
    assert float(out[1]) < 1.4  # CPU seconds per wall second: one busy thread


def test_both_cpu_runtimes_render_the_same_frame(scenes):
    """Where PoCL and Intel's runtime both build, one frame on each: the same image."""
    from raytracer.mesh.tracer import RenderSettings, Tracer

    cpus = {i.runtime: i for i in od.list_devices() if i.kind == "CPU" and i.builds}
    if not {"pocl", "intel-cpu"} <= set(cpus):
        pytest.skip(f"only {sorted(cpus)} build here: nothing to compare")
    scene = scenes("bunny")
    images = [Tracer(scene, device=cpus[r].spec).render(
        scene.camera, 160, 90, RenderSettings(ao_rays=0, shadows=True)).image.astype(int)
        for r in ("pocl", "intel-cpu")]
    assert np.mean(np.abs(images[0] - images[1]) > 2) < 0.002


def test_simd_width_fits_every_ratio_so_one_misread_does_not_move_it():
    from raytracer.device.traits import width_from_ratios

    one_at_a_time = {2: 0.5, 4: 0.25, 8: 0.13, 16: 0.06, 32: 0.03, 64: 0.016}
    assert width_from_ratios(one_at_a_time) == 1
    # the CI machine's misread: k = 2 read above a 0.7 threshold, the rest fell as 1/k
    assert width_from_ratios({**one_at_a_time, 2: 0.82}) == 1
    sixteen_lanes = {2: 1.0, 4: 1.01, 8: 0.99, 16: 1.0, 32: 0.5, 64: 0.25}
    assert width_from_ratios(sixteen_lanes) == 16
    assert width_from_ratios({**sixteen_lanes, 8: 0.62}) == 16
    assert width_from_ratios({2: 1.0, 4: 0.98, 8: 1.0}) == 8  # flat to the largest k measured


def test_simd_width_is_measured_again_while_no_width_fits():
    from raytracer.device.traits import WIDTH_ATTEMPTS, width_from_attempts

    one_at_a_time = {2: 0.5, 4: 0.25, 8: 0.125, 16: 0.063, 32: 0.031, 64: 0.016}
    # a loaded machine: the sparse launches slowed throughout, so width 2 fits best, badly
    slowed = {2: 0.9, 4: 0.52, 8: 0.22, 16: 0.13, 32: 0.045, 64: 0.04}
    calls = []

    def measure(sequence):
        def once():
            calls.append(1)
            return sequence[len(calls) - 1]
        return once

    assert width_from_attempts(measure([slowed, one_at_a_time, slowed])) == 1
    assert len(calls) == 2  # stopped at the first measurement that fits
    calls.clear()
    assert width_from_attempts(measure([one_at_a_time])) == 1 and len(calls) == 1
    calls.clear()
    # no measurement fits: each k's median over them decides
    misread = [slowed, {**one_at_a_time, 2: 0.7}, {**one_at_a_time, 4: 0.4}]
    assert width_from_attempts(measure(misread)) == 1
    assert len(calls) == WIDTH_ATTEMPTS


class _FakeGpu:
    """A device that reports a warp width through a vendor extension (or fails to)."""

    def __init__(self, extensions: str, width: int | Exception) -> None:
        self.extensions, self._width = extensions, width

    def get_info(self, code: int) -> int:
        if isinstance(self._width, Exception):
            raise self._width
        return {0x4003: self._width, 0x4043: self._width}[code]


def test_a_gpu_drivers_reported_warp_width_is_taken_at_its_word():
    """Timing every-k-th-item launches reads an H200 as 64 wide (idle warps free the issue
    slots); the driver's CL_DEVICE_WARP_SIZE_NV says 32, and is what the traits keep."""
    from raytracer.device.traits import reported_simd_width

    assert reported_simd_width(_FakeGpu("cl_khr_fp64 cl_nv_device_attribute_query", 32)) == (
        32, "reported by the driver (CL_DEVICE_WARP_SIZE_NV)")
    assert reported_simd_width(_FakeGpu("cl_amd_device_attribute_query", 64))[0] == 64
    assert reported_simd_width(_FakeGpu("cl_khr_fp64", 32)) is None
    assert reported_simd_width(_FakeGpu("cl_nv_device_attribute_query", ValueError())) is None
