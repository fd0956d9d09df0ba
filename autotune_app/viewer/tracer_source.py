"""The ray tracer in the viewer: :class:`TracerSource` adapts a ``TunedRenderer``."""

from __future__ import annotations

import argparse
from typing import Any

import glfw

from autotune_app.animation import FrameLog, summarize
from autotune_app.limits import LimitError, check_device_memory
from autotune_app.scenes import load_scene
from autotune_app.viewer.errors import ViewerError
from autotune_app.viewer.source import ViewFrame, on_off
from governed.mesh.tuned_renderer import TunedRenderer
from raytracer.camera import Camera
from raytracer.device.choice import DeviceError
from raytracer.mesh.phases import PHASES
from raytracer.mesh.scene import SceneError
from raytracer.mesh.tracer import TracerError

SHADOW_CYCLE = {None: True, True: False, False: None}  # Shift+S: auto -> on -> off -> auto


class TracerSource:
    """The tuned ray tracer as the viewer drives it; Shift+S forces shadows on or off."""

    fields = (*(f"{p}_ms" for p in PHASES), "ao_rays", "ao_radius", "shadows", "phong")
    help = ["Shift+S        shadows auto/on/off"]

    def __init__(self, renderer: TunedRenderer, name: str) -> None:
        self.renderer, self.label = renderer, name
        self.device = renderer.tracer.device_info.name
        self.home, self.extent = renderer.scene.camera, renderer.scene.diagonal

    @property
    def target_seconds(self) -> float:
        return self.renderer.target_seconds

    @target_seconds.setter
    def target_seconds(self, seconds: float) -> None:
        self.renderer.target_seconds = seconds

    @property
    def tuning(self) -> bool:
        return self.renderer.tuning

    @tuning.setter
    def tuning(self, on: bool) -> None:
        self.renderer.tuning = on

    def set_controller(self, name: str) -> None:
        self.renderer.use_controller(name)

    def key(self, key: int, mods: int) -> bool:
        if key == glfw.KEY_S and mods & glfw.MOD_SHIFT:
            self.renderer.force_shadows = SHADOW_CYCLE[self.renderer.force_shadows]
            return True
        return False

    def resize(self, width: int, height: int) -> None:
        self.renderer.resize(width, height)

    def start(self, show: Any) -> None:
        pass

    def finish(self, status: int) -> None:
        pass

    def render(self, camera: Camera) -> ViewFrame:
        r = self.renderer
        index = r.frame_index
        frame = r.render(camera)
        s = frame.settings
        forced = {None: "auto", True: "forced", False: "forced"}[r.force_shadows]
        knobs = (f"AO rays {s.ao_rays:.2f}  AO radius {s.ao_radius:.2f}  shadows "
                 f"{on_off(s.shadows)} ({forced})  phong {on_off(s.phong)}")
        cols = {f"{p}_ms": frame.phase_seconds.get(p, 0.0) * 1e3 for p in PHASES}
        cols.update(ao_rays=s.ao_rays, ao_radius=s.ao_radius, shadows=int(s.shadows),
                    phong=int(s.phong))
        log = FrameLog(index, r.target_seconds, frame.measured, frame.predicted,
                       frame.corrected, s.ao_rays, s.shadows, s.phong, frame.probe_seconds,
                       frame.over_budget)
        return ViewFrame(frame.image, frame.measured, frame.predicted, frame.corrected,
                         frame.probe_seconds, frame.over_budget, knobs, cols, log)

    def summary(self, logs: list[FrameLog]) -> tuple[dict[str, Any], str]:
        shadows = sum(x.shadows for x in logs) / len(logs)
        phong = sum(x.phong for x in logs) / len(logs)
        return summarize(logs), f"shadows on in {shadows:.0%} of frames, phong on in {phong:.0%}"

    def run_info(self) -> dict[str, Any]:
        return {"scene": self.label, "device": self.device}


def load_tracer_source(args: argparse.Namespace, width: int, height: int,
                       target: float) -> TracerSource:
    """Load the scene and build the tuned renderer; failures become one-line ViewerErrors."""
    try:
        scene = load_scene(args.scene, up=getattr(args, "up", "y"))
        renderer = TunedRenderer(
            scene, width, height, target, controller=args.controller, device=args.device,
            probe_policy=args.probe_policy,
        )
        check_device_memory(renderer.tracer, width, height)
    except (SceneError, TracerError, DeviceError, LimitError) as exc:
        raise ViewerError(str(exc)) from None
    return TracerSource(renderer, str(args.scene))
