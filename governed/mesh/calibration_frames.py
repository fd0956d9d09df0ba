"""The frames a calibration is fitted on: which scenes, sizes, views and knobs, and how each
is measured (:class:`Sample`: the probe's workload, the knobs and the device timer's seconds
per phase). :mod:`governed.mesh.calibration_fit` fits the model to them.

Calibration scenes are procedural (spheres, city) and one mesh (bunny); ``autotune bench
model`` evaluates on the other meshes, at other resolutions, along other camera paths.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from governed.mesh.instruction_counts import kernels_fingerprint
from governed.mesh.probe import Probe
from governed.mesh.timers import KernelEvents, default_timer
from models.workload import Workload
from raytracer.camera import Camera, orbit_path
from raytracer.device.choice import DeviceInfo
from raytracer.mesh.scene import Scene, load_scene
from raytracer.mesh.tracer import RenderSettings, Tracer

# The scenes calibrated on, quick or full, CPU or GPU: two procedural scenes and a scanned mesh.
# Without the mesh a quick calibration on this Zen 4's Intel runtime priced the validation
# orbits 25-31 % off before feedback, with it 6-13 % (bench tracer-tuned, feed-forward, two
# quiet runs each); on the H200 the model missed held-out mesh frames by 72 % without it.
CALIBRATION_SCENES = ("spheres", "city", "bunny")
QUICK_SIZES = ((192, 108), (320, 180))
FULL_SIZES = ((320, 180), (640, 360))
# a GPU runs a 320x180 frame in a few launches' overhead and fills none of its cores: its frames
# are calibrated where it is used (a frame of 1080p to 4K), on the same scenes and views
GPU_QUICK_SIZES = ((640, 360), (1280, 720))
GPU_FULL_SIZES = ((1280, 720), (1920, 1080))
CALIBRATION_SETTINGS = (
    RenderSettings(0, 0.1, False, False), RenderSettings(2, 0.1, True, True),
    RenderSettings(8, 0.1, False, True), RenderSettings(16, 0.1, True, False),
)


@dataclass(frozen=True)
class Sample:
    """One measured frame: its workload, knobs and seconds per phase (as the timer counts
    them), with the kernel events' own figures where they differ."""

    workload: Workload
    settings: RenderSettings
    phase_seconds: dict[str, float]
    event_seconds: dict[str, float] = field(default_factory=dict)
    scene: str = ""
    kernels: str = ""  # the kernels that rendered it (instruction_counts.kernels_fingerprint)

    def to_dict(self) -> dict:
        """Plain JSON of the frame (what a recording of calibration or held-out frames keeps);
        a frame whose AO kept no history (or was not filtered) says so by leaving
        ``ao_history`` (``ao_filter``) out, as every frame recorded before the history (the
        filter) existed does."""
        settings = dataclasses.asdict(self.settings)
        for kept_out in ("ao_history", "ao_filter"):
            if not settings[kept_out]:
                del settings[kept_out]
        return {"scene": self.scene, "settings": settings,
                "workload": self.workload.to_dict(), "phase_seconds": self.phase_seconds,
                "event_seconds": self.event_seconds, "kernels": self.kernels}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sample:
        """The frame :meth:`to_dict` wrote."""
        return cls(Workload(**d["workload"]),
                   RenderSettings(**{"ao_history": False, "ao_filter": False,
                                     **d["settings"]}),
                   dict(d["phase_seconds"]), dict(d.get("event_seconds", {})), d.get("scene", ""),
                   d.get("kernels", ""))


def calibration_views(scene: Scene, count: int, sky: bool = False) -> list[Camera]:
    """Views that orbit and dolly into the scene (the paper's animation, sampled); with
    ``sky``, two more from the first eye: turned 25° aside (the scene at the frame's edge) and
    turned away (an empty view), so missed pixels and launch costs are measured too."""
    cam = scene.camera
    views = orbit_path(np.asarray(cam.target), np.asarray(cam.eye), count, turns=0.75,
                       dolly=0.45, up=cam.up, fov_y=cam.fov_y)
    if sky:
        eye, target = np.asarray(cam.eye, np.float64), np.asarray(cam.target, np.float64)
        d = target - eye
        c, s = np.cos(np.radians(25)), np.sin(np.radians(25))
        aside = eye + np.array([c * d[0] - s * d[2], d[1], s * d[0] + c * d[2]])
        views += [Camera(tuple(eye), tuple(aside), cam.up, cam.fov_y),
                  Camera(tuple(eye), tuple(eye - d), cam.up, cam.fov_y)]
    return views


def collect_samples(tracer: Tracer, probe: Probe, cameras: list[Camera], width: int, height: int,
                    settings: tuple[RenderSettings, ...] = CALIBRATION_SETTINGS,
                    bar: tqdm | None = None, timer: KernelEvents | None = None,
                    scene: str = "") -> list[Sample]:
    """Render every view with every setting (after one warm-up) and keep what was measured.

    ``timer`` defines the measured seconds (default: the device's, see
    :func:`governed.mesh.timers.default_timer`)."""
    timer = timer or default_timer(tracer)
    kernels = kernels_fingerprint(tracer.launches, tracer.build_options)
    samples = []
    tracer.render(cameras[0], width, height, settings[0])  # warm-up: first launch compiles
    for cam in cameras:
        workload = probe.measure(cam, width, height)
        for s in settings:
            timed = timer.render(tracer, cam, width, height, s)
            samples.append(Sample(workload, s, timed.phase_seconds, timed.event_seconds,
                                  scene, kernels))
            if bar is not None:
                bar.update(1)
    return samples


def calibration_sizes(device: DeviceInfo, quick: bool) -> tuple[tuple[int, int], ...]:
    """The frame sizes calibrated on: small on a CPU device, 720p-1080p on a GPU."""
    if device.kind == "GPU":
        return GPU_QUICK_SIZES if quick else GPU_FULL_SIZES
    return QUICK_SIZES if quick else FULL_SIZES


def collect_calibration_samples(device: DeviceInfo, quick: bool, progress: bool = True,
                                scenes: tuple[str, ...] | None = None,
                                views: int | None = None) -> list[Sample]:
    """Frames of the calibration scenes at the calibration sizes, timed by the device's timer."""
    scenes = scenes or CALIBRATION_SCENES
    sizes = calibration_sizes(device, quick)
    views = views or (3 if quick else 6)
    spec = f"{device.platform_index}:{device.device_index}"
    samples: list[Sample] = []
    total = len(scenes) * len(sizes) * (views + 2) * len(CALIBRATION_SETTINGS)
    with tqdm(total=total, desc="calibrating", unit="frame", disable=not progress) as bar:
        for name in scenes:
            scene = load_scene(name)
            tracer = Tracer(scene, device=spec)
            probe = Probe.for_tracer(tracer)
            for width, height in sizes:
                samples += collect_samples(tracer, probe, calibration_views(scene, views, True),
                                           width, height, bar=bar, scene=name)
    return samples
