"""What one iteration of a module does in a pipeline run: busy work of a set time and load, or
real work of this project's renderers, so the mapping model can be checked on them.

- ``busy``: burn T_exec·LD of CPU time, then sleep T_exec·(1 − LD) (the module's I/O).
- ``probe``: the ray tracer's CPU probe (numba) measures the scene's view at ``width`` x
  ``height``, as the tuned renderer does before every frame.
- ``render``: the OpenCL tracer renders the view at ``width`` x ``height`` with shadows.
- ``composite``: blends two RGBA float images of ``width`` x ``height`` with the over operator,
  as a sort-last compositor does with two ranks' images.

The real kinds use one core: the runtime launches every rank with ``NUMBA_NUM_THREADS=1`` and
``AUTOTUNE_COMPUTE_UNITS=1`` (:data:`ONE_THREAD_ENV`, read when numba and the OpenCL runtime
load). Their T_exec and LD are not set: they are measured alone (:mod:`.alone`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from raytracer.mesh.scene import load_scene

REAL_KINDS = ("probe", "render", "composite")
ONE_THREAD_ENV = {"NUMBA_NUM_THREADS": "1", "AUTOTUNE_COMPUTE_UNITS": "1"}


@dataclass(frozen=True)
class Work:
    """A real module's work: its kind, the shipped scene it works on and the image size."""

    kind: str
    scene: str = "dragon-small"
    width: int = 160
    height: int = 90

    def __post_init__(self) -> None:
        if self.kind not in REAL_KINDS:
            raise ValueError(f"real work is one of {', '.join(REAL_KINDS)}, got {self.kind!r}")
        if self.width < 1 or self.height < 1:
            raise ValueError(f"work size must be >= 1x1, got {self.width}x{self.height}")


def busy(cpu_seconds: float) -> None:
    """Use ``cpu_seconds`` of this thread's CPU time (longer on a shared core)."""
    end = time.thread_time() + cpu_seconds
    while time.thread_time() < end:
        pass


def busy_step(t_exec_ms: float, load: float) -> Callable[[], None]:
    """One busy-work iteration: T_exec·LD of CPU time, then T_exec·(1 − LD) of sleep."""
    cpu_s, io_s = t_exec_ms * load * 1e-3, t_exec_ms * (1 - load) * 1e-3

    def step() -> None:
        busy(cpu_s)
        time.sleep(io_s)

    return step


def real_step(work: Work) -> Callable[[], None]:
    """One iteration of ``work``, set up (scene loaded, BVH built, kernels compiled) and run
    once, so the first timed iteration is like the others."""
    step = _composite(work) if work.kind == "composite" else _traced(work)
    step()
    return step


def _traced(work: Work) -> Callable[[], None]:
    """The probe or the tracer on the shipped scene's own camera."""
    from raytracer.mesh.bvh import build_bvh  # lazy: numba; the launcher imports this module

    scene = load_scene(work.scene)
    bvh = build_bvh(scene.triangles())
    camera = scene.camera
    if work.kind == "probe":
        from governed.mesh.probe import Probe  # lazy: loads numba

        probe = Probe(scene, bvh, simd_width=1)  # set: no OpenCL device query in this rank
        return lambda: probe.measure(camera, work.width, work.height)
    from raytracer.mesh.tracer import RenderSettings, Tracer  # lazy: loads pyopencl, numba

    tracer, settings = Tracer(scene, bvh), RenderSettings(0, 0.1, True, True)
    return lambda: tracer.render(camera, work.width, work.height, settings)


def _composite(work: Work) -> Callable[[], None]:
    """Two fixed RGBA images blended front over back (premultiplied alpha)."""
    rng = np.random.default_rng(0)
    front, back = (rng.random((work.height, work.width, 4), np.float32) for _ in range(2))
    out = np.empty_like(front)

    def step() -> None:
        np.multiply(back, 1.0 - front[..., 3:], out=out)
        np.add(out, front, out=out)

    return step
