"""Which functions the compiled PoCL kernels call: a check that the hot path stays inline.

PoCL keeps each compiled kernel as a shared object in its cache (``POCL_CACHE_DIR``); a
subprocess renders one small frame with every phase on the first PoCL device that builds (not
the default device, which may be another runtime) into a fresh cache, and ``objdump -d``
lists the ``call`` targets of each kernel's ``.so``. On the pip PoCL here an OpenCL builtin
that is not inlined shows up as ``_Z8_cl_fminff`` and friends (see kernels/rtmath.cl), a
helper that is not inlined by its own name (``trace``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

# libm calls that clang emits for __builtin_sinf/cosf/exp2f/log2f: AO sample directions and
# the display gamma, once per ray or pixel, never inside the traversal loop
LIBM_ALLOWED = frozenset({"sincosf", "sinf", "cosf", "exp2f", "log2f"})

_RENDER = """
import warnings
warnings.simplefilter("ignore")
from raytracer.device.launches import DEFAULTS, KernelLaunches, Launch
from raytracer.device.choice import DeviceError
from raytracer.mesh.scene import load_scene
from raytracer.mesh.phases import PACKET_PHASES, RAY_PACKET
from raytracer.mesh.tracer import RenderSettings, Tracer
scene = load_scene("spheres")
packets = KernelLaunches({phase: Launch(packet=RAY_PACKET) for phase in PACKET_PHASES})
for launches in (DEFAULTS, packets):  # the kernels and their packet forms
    try:
        tracer = Tracer(scene, device="pocl", launches=launches)
    except DeviceError as exc:
        print("no PoCL device builds here:", exc)
        raise SystemExit(0)
    tracer.render(scene.camera, 16, 16, RenderSettings(ao_rays=2, shadows=True, phong=True))
from raytracer.camera import Camera
from raytracer.volume import Raycaster, default_for, load_volume
volume = load_volume("marschner-lobb:16")
camera = Camera((0.0, 0.0, 3.0 * volume.radius), (0.0, 0.0, 0.0))
for packet in ((1, 1), (4, 4)):
    caster = Raycaster(volume, default_for("marschner-lobb"), device="pocl",
                       launch=Launch(packet=packet))
    caster.render(camera, 16, 16)
print(tracer.device.platform)
"""
_CALL = re.compile(r"\bcall[q]?\s+[0-9a-f]+\s+<([^>]+)>")


class KernelCallsUnavailable(RuntimeError):
    """The check cannot run here: no objdump, or no PoCL device builds."""


def calls_in_object(path: Path) -> Counter[str]:
    """Call targets in a shared object's disassembly (``name@plt`` reported as ``name``)."""
    proc = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(path)],
                          capture_output=True, text=True, check=True)
    return Counter(m.group(1).split("@")[0] for m in _CALL.finditer(proc.stdout))


def compiled_kernel_calls(timeout: float = 300.0) -> dict[str, Counter[str]]:
    """``{kernel: Counter(call target)}`` of the tracer's and the caster's kernels as PoCL
    compiles them."""
    if shutil.which("objdump") is None:
        raise KernelCallsUnavailable("objdump not found (binutils)")
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="pocl-cache-") as cache:
        env = dict(os.environ, POCL_CACHE_DIR=cache, POCL_KERNEL_CACHE="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        proc = subprocess.run([sys.executable, "-c", _RENDER], env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"render for the kernel-call check failed:\n{proc.stderr[-2000:]}")
        if "portable computing language" not in proc.stdout.lower():
            raise KernelCallsUnavailable(proc.stdout.strip())
        out: dict[str, Counter[str]] = {}
        for so in Path(cache).rglob("*.so"):
            out.setdefault(so.stem, Counter()).update(calls_in_object(so))
    return out


def forbidden_calls(calls: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
    """Per kernel, the calls that are not allowed libm calls (builtins, helpers)."""
    return {k: {t: n for t, n in c.items() if t not in LIBM_ALLOWED}
            for k, c in calls.items() if any(t not in LIBM_ALLOWED for t in c)}
