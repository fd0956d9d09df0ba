"""Make the OpenCL runtimes that pip installed visible to the ICD loader, before it first looks.

PyOpenCL's ICD loader (ocl-icd) finds drivers through ``.icd`` files: its own bundled PoCL, then
the files in ``$OCL_ICD_VENDORS`` if set, else in ``/etc/OpenCL/vendors``. Intel's CPU runtime
from PyPI (``intel-opencl-rt``) installs ``lib/libintelocl.so`` into the environment but its
``.icd`` names the path of the machine it was built on, so the loader never finds it. This module
writes one folder of ``.icd`` files — the pip-installed Intel runtime by absolute path plus a copy
of every ``.icd`` the loader would have read anyway (the user's ``$OCL_ICD_VENDORS`` folder or
file, else the system's ``/etc/OpenCL/vendors``: GPU drivers stay visible) — and points
``$OCL_ICD_VENDORS`` at it. The loader reads the variable on its first platform query, so
:func:`prepare_runtimes` (this, the CPU runtimes' thread limit and PoCL's work-group method) runs
before the device layer's first query (:func:`raytracer.device.choice.list_devices`,
:func:`~raytracer.device.choice.choose_device`); importing :mod:`raytracer` changes nothing. An
application that queries OpenCL platforms itself calls :func:`prepare_runtimes` first, or sees
only the runtimes it had.

The folder is named by a hash of its contents under the user's cache
(``$AUTOTUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/autotune``, else ``~/.cache/autotune``),
so MPI ranks and later runs share it; it is written to a temporary name and renamed, so no rank
ever reads half of it. Child processes (``mpiexec`` ranks) inherit the variable.

A GPU driver's OpenCL library can be present without its ``.icd`` file: a container that mounts
the NVIDIA driver (``/usr/local/nvidia``) may bring ``libnvidia-opencl.so.1`` but no
``/etc/OpenCL/vendors/nvidia.icd``. Such a library, found in the driver's usual folders or on
``$LD_LIBRARY_PATH``, is registered the same way (:func:`driver_libraries`).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, MutableMapping
from importlib import metadata
from pathlib import Path

from common.cache_folder import cache_dir

VENDORS_ENV = "OCL_ICD_VENDORS"
SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
COMPUTE_UNITS_ENV = "AUTOTUNE_COMPUTE_UNITS"
# the documented thread-count setting of each CPU runtime that has one (limit_cpu_threads)
THREAD_LIMIT_ENV = {"pocl": "POCL_MAX_PTHREAD_COUNT", "intel-cpu": "DPCPP_CPU_NUM_CUS"}
# PoCL's work-group method, and the one set unless the user chose one (pocl_work_group_method)
POCL_METHOD_ENV = "POCL_WORK_GROUP_METHOD"
POCL_METHOD = "loops"
# pip distributions that carry an OpenCL driver library, and the library's file name
PIP_RUNTIMES = {"intel-opencl-rt": "libintelocl.so"}
# GPU drivers' OpenCL libraries, looked for where no .icd file names them (driver_libraries)
DRIVER_LIBRARIES = {"nvidia": "libnvidia-opencl.so.1"}
DRIVER_FOLDERS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu",
                  "/usr/lib64", "/usr/lib", "/usr/local/cuda/lib64", "/usr/lib/wsl/lib")

_registered: str | None = None
_prepared = False



def store_cache_file(path: Path, document: dict) -> None:
    """Write one JSON file of the cache atomically; a cache that cannot be written is only
    skipped (what it would have kept is measured again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(document, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass


def pip_runtime_libraries() -> dict[str, Path]:
    """``{distribution: absolute library path}`` of the OpenCL drivers pip installed here."""
    found = {}
    for dist_name, library in PIP_RUNTIMES.items():
        try:
            files = metadata.distribution(dist_name).files or []
        except metadata.PackageNotFoundError:
            continue
        for entry in files:
            if entry.name == library:
                path = Path(entry.locate()).resolve()
                if path.is_file():
                    found[dist_name] = path
                    break
    return found


def driver_search_folders(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Folders searched for a GPU driver's OpenCL library: ``$LD_LIBRARY_PATH``, then the
    driver's usual places (:data:`DRIVER_FOLDERS`)."""
    environ = os.environ if environ is None else environ
    listed = [p for p in environ.get("LD_LIBRARY_PATH", "").split(":") if p]
    return [Path(p) for p in dict.fromkeys(listed + list(DRIVER_FOLDERS))]


def driver_libraries(existing: dict[str, str], folders: list[Path]) -> dict[str, Path]:
    """``{vendor: library path}`` of the GPU drivers' OpenCL libraries in ``folders`` that no
    ``existing`` ``.icd`` file names (those the loader would not find on its own)."""
    named = {Path(text.strip()).name for text in existing.values()}
    found = {}
    for vendor, library in DRIVER_LIBRARIES.items():
        if library in named:
            continue
        for folder in folders:
            path = folder / library
            if path.is_file():
                found[vendor] = path
                break
    return found


def existing_icds(environ: Mapping[str, str] | None = None,
                  system: Path = SYSTEM_VENDORS) -> dict[str, str]:
    """``{file name: contents}`` of the ``.icd`` files the loader would read without us."""
    environ = os.environ if environ is None else environ
    source = Path(environ[VENDORS_ENV]) if environ.get(VENDORS_ENV) else system
    if source.is_file():
        return {source.name: source.read_text()}
    if not source.is_dir():
        return {}
    icds = {}
    for path in sorted(source.glob("*.icd")):
        try:
            icds[path.name] = path.read_text()
        except OSError:
            continue
    return icds


def vendor_files(libraries: dict[str, Path], existing: dict[str, str]) -> dict[str, str]:
    """The ``.icd`` files of the folder to register: ``existing`` plus each pip library that no
    existing file already names (a system-wide Intel runtime is not registered twice)."""
    files = dict(existing)
    named = {Path(text.strip()).name.split(".so")[0] for text in existing.values()}
    for dist_name, library in libraries.items():
        if library.name.split(".so")[0] in named:
            continue
        files[f"autotune-{dist_name}.icd"] = f"{library}\n"
    return files


def write_vendor_folder(files: dict[str, str], root: Path) -> Path:
    """``root/opencl-vendors-<hash>`` holding ``files``; written once, atomically by rename."""
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:16]
    folder = root / f"opencl-vendors-{digest}"
    if folder.is_dir():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".opencl-vendors-", dir=root))
    for name, text in files.items():
        (staging / name).write_text(text)
    try:
        staging.rename(folder)
    except OSError:  # another process renamed the same contents first
        for path in staging.iterdir():
            path.unlink()
        staging.rmdir()
    return folder


def register_pip_runtimes() -> str | None:
    """Point ``$OCL_ICD_VENDORS`` at a folder that adds pip's OpenCL runtimes, and GPU driver
    libraries no ``.icd`` file names, to those already visible; returns the folder, or None when
    there are none (nothing is changed then).

    Idempotent; a cache folder that cannot be written falls back to the temporary folder."""
    global _registered
    if _registered is not None and os.environ.get(VENDORS_ENV) == _registered:
        return _registered
    existing = existing_icds()
    libraries = pip_runtime_libraries() | driver_libraries(existing, driver_search_folders())
    if not libraries:
        return None
    files = vendor_files(libraries, existing)
    try:
        folder = write_vendor_folder(files, cache_dir())
    except OSError:
        folder = write_vendor_folder(files, Path(tempfile.gettempdir()) / f"autotune-{os.getuid()}")
    _registered = str(folder)
    os.environ[VENDORS_ENV] = _registered
    return _registered


def limit_cpu_threads(environ: MutableMapping[str, str] | None = None) -> None:
    """Each pip CPU runtime's documented thread limit from ``$AUTOTUNE_COMPUTE_UNITS``.

    PoCL reads ``POCL_MAX_PTHREAD_COUNT``; Intel's runtime ``DPCPP_CPU_NUM_CUS`` ("the number
    of threads used for kernel execution", oneAPI programming guide, *Control Binary Execution
    on Multiple CPU Cores*). Both are read when the runtime loads, so this runs before the first
    platform query (:func:`prepare_runtimes`). Intel's runtime also offers device fission, but
    its sub-device of one compute unit still ran kernels on both cores here (CPU time 2x wall),
    so fission is kept for runtimes without such a setting
    (:func:`raytracer.device.choice.choose_device`)."""
    environ = os.environ if environ is None else environ
    units = environ.get(COMPUTE_UNITS_ENV, "").strip()
    if units.isdigit() and int(units) > 0:
        for variable in THREAD_LIMIT_ENV.values():
            environ[variable] = units


def pocl_work_group_method(environ: MutableMapping[str, str] | None = None) -> None:
    """PoCL's work-group method ``loops`` unless ``$POCL_WORK_GROUP_METHOD`` already names one.

    PoCL wraps each kernel in loops over its work-items; its default method, ``loopvec``, also
    tries to vectorize those loops across work-items, which the tracer's divergent traversal
    and the caster's explicit vector lanes never allow, and its code for them is slower: on the
    system's PoCL 3.1 here (one compute unit, same images) primary rays 12-19 % and the volume
    caster 17-20 % faster under ``loops``, shadow, AO and shade unchanged. PoCL reads the
    variable when it compiles a kernel, and this runs before the first platform query
    (:func:`prepare_runtimes`), so before any is built; the variable is process-wide, so an
    application's own PoCL kernels get ``loops`` too (set it to keep another)."""
    environ = os.environ if environ is None else environ
    environ.setdefault(POCL_METHOD_ENV, POCL_METHOD)


def prepare_runtimes() -> None:
    """Ready the OpenCL runtimes before the ICD loader's first platform query: pip's runtimes
    and unnamed GPU driver libraries registered (:func:`register_pip_runtimes`), each CPU
    runtime's thread limit from ``$AUTOTUNE_COMPUTE_UNITS`` (:func:`limit_cpu_threads`) and
    PoCL's work-group method (:func:`pocl_work_group_method`). The device layer calls it before
    every query it makes; once per process, later calls do nothing (the loader and the runtimes
    read these once). An MPI rank that shares its machine's cores sets its share in
    ``$AUTOTUNE_COMPUTE_UNITS`` and the limits before its first query
    (:func:`raytracer.mpi.pinning.share_node`); this then sets the same figures."""
    global _prepared
    if _prepared:
        return
    register_pip_runtimes()
    limit_cpu_threads()
    pocl_work_group_method()
    _prepared = True
