"""Timer observers: which clock defines a measured frame (docs/architecture.md, "What frame
time means").

Each experiment declares the timer it measures with, and its JSON says so (``describe()``):

- :class:`KernelEvents` — the OpenCL profiling events of each kernel: what the device spent,
  plus any time the device's threads were not running. On a GPU this is the kernel time.
- :class:`CpuBusy` — for a CPU OpenCL device (PoCL runs the kernels on threads of this
  process): each phase launched alone and waited for, its cost the process's CPU seconds
  meanwhile divided by the device's worker threads. It is what the frame costs on an
  otherwise idle machine; on a shared one the events also count the time other tenants held
  the cores (measured here: 2-4x under load 8-16 on 2 cores, while CPU seconds stay within
  +-3 %). The model predicts a device's own cost, so calibration and model-accuracy figures
  use this timer on a CPU device; the tuner itself always controls the wall-clock frame.
  A runtime's worker threads keep spinning for a while after a kernel ends (Intel's does),
  so the CPU seconds are read only once the process has gone idle, before the launch and
  after the wait (:func:`settled_cpu_seconds`): each phase then pays its own spin tail and
  none of the previous phase's. Read at once instead, the same frames measured twice on
  Intel's runtime differed by 11 % mean (shade phase 29 %); settled, by 4.8 % (8 %).

The frame the user waits for (the tuner's work + kernels + read-back) is timed by
:class:`~governed.mesh.tuned_renderer.TunedRenderer` with the wall clock.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

from raytracer.camera import Camera
from raytracer.mesh.phases import PHASE_LIST
from raytracer.mesh.tracer import RenderSettings, Tracer


def process_cpu_seconds() -> float:
    """User + system CPU seconds of this process, all threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


SETTLE_STEP = 0.0005  # seconds between two readings of the process's CPU time
SETTLE_IDLE = 0.1  # busy share of one core below which the process counts as idle
SETTLE_LIMIT = 0.05  # seconds after which the reading is taken idle or not


def settled_cpu_seconds(step: float = SETTLE_STEP, idle: float = SETTLE_IDLE,
                        limit: float = SETTLE_LIMIT) -> float:
    """:func:`process_cpu_seconds` once the process has gone idle (its threads used less than
    ``idle`` of a core over one ``step``), or after ``limit`` seconds: the OpenCL runtime's
    workers have stopped spinning, so what they spin on is counted with the phase that made
    them spin."""
    deadline = time.perf_counter() + limit
    last = process_cpu_seconds()
    while time.perf_counter() < deadline:
        time.sleep(step)
        now = process_cpu_seconds()
        if now - last < idle * step:
            return now
        last = now
    return process_cpu_seconds()


@dataclass
class TimedFrame:
    """A rendered frame's phase seconds as the timer counts them, the events' own figures and
    the wall clock of the call."""

    phase_seconds: dict[str, float]
    event_seconds: dict[str, float]
    wall_seconds: float


class KernelEvents:
    """Phase seconds from the kernels' OpenCL profiling events; with ``warm_up``, of a frame
    rendered right after an untimed render of the same frame. On an H200 the quick
    calibration's in-sample error was 36.6 % without it and 18.3 % with it (one run each, the
    same code otherwise); its clocks stayed at 1980 MHz through both, so what a first render
    after the probe pays is not the clock ramp, and is not known yet."""

    name = "kernel-events"

    def __init__(self, warm_up: bool = False) -> None:
        self.warm_up = warm_up

    def describe(self) -> str:
        return ("kernel time from OpenCL profiling events (device wall clock per kernel)"
                + (", each frame rendered once untimed first" if self.warm_up
                   else ""))

    def render(self, tracer: Tracer, camera: Camera, width: int, height: int,
               settings: RenderSettings, seed: int = 0) -> TimedFrame:
        if self.warm_up:
            tracer.render(camera, width, height, settings, seed=seed)
        start = time.perf_counter()
        frame = tracer.render(camera, width, height, settings, seed=seed)
        wall = time.perf_counter() - start
        return TimedFrame(dict(frame.phase_seconds), dict(frame.phase_seconds), wall)


class CpuBusy(KernelEvents):
    """Per phase: process CPU seconds while it runs alone / the device's worker threads."""

    name = "cpu-busy"

    def __init__(self, threads: int) -> None:
        if threads < 1:
            raise ValueError(f"CpuBusy needs >= 1 worker thread, got {threads}")
        super().__init__()
        self.threads = threads

    def describe(self) -> str:
        return (f"CPU busy time: each phase launched alone, the process's CPU seconds from "
                f"idle before it to idle after it / {self.threads} worker threads (what the "
                f"frame costs on an idle machine; unaffected by other tenants)")

    def render(self, tracer: Tracer, camera: Camera, width: int, height: int,
               settings: RenderSettings, seed: int = 0) -> TimedFrame:
        start = time.perf_counter()
        busy, events = {}, {}
        for phase in PHASE_LIST:
            if phase.enabled_by is not None and not getattr(settings, phase.enabled_by):
                continue
            cpu0 = settled_cpu_seconds()
            events[phase.name] = tracer.time_phase(phase.name, camera, width, height, settings,
                                                   seed)
            busy[phase.name] = (settled_cpu_seconds() - cpu0) / self.threads
        return TimedFrame(busy, events, time.perf_counter() - start)


def default_timer(tracer: Tracer) -> KernelEvents:
    """CPU busy time on a CPU OpenCL device (in-process threads), kernel events elsewhere
    (each frame after a warm-up render of it on a GPU)."""
    info = tracer.device_info
    if info.kind == "CPU":
        return CpuBusy(max(1, info.compute_units))
    return KernelEvents(warm_up=info.kind == "GPU")
