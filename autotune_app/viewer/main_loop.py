"""The viewer's main loop (:class:`Viewer`): input, governed render, display, record.

Every frame: a tuner-governed renderer (a :class:`~autotune_app.viewer.source.FrameSource`:
the ray tracer, or the distributed volume renderer) renders the view, the image is uploaded
as a texture and drawn with the overlay, read back if recorded, and presented. The target is
the interval between shown frames: every part of it is timed
(:class:`~autotune_app.viewer.interval.FrameInterval`), and the renderer's target is what the
rest leaves, so the interval a person sees is what is held. The parts show in the overlay and
in ``--record``'s frames.csv and run.json. The key bindings and the overlay's status lines
live here too.
"""

from __future__ import annotations

import math
import time
from collections import deque
from pathlib import Path
from typing import Any

import glfw
import numpy as np

from autotune.controllers import CONTROLLER_NAMES, CONTROLLERS
from autotune_app.viewer.controls import CameraController
from autotune_app.viewer.interval import FrameInterval
from autotune_app.viewer.overlay import GREY, WHITE, FrameHistory, Overlay, PlotPoint
from autotune_app.viewer.record import Recorder, free_name, save_png
from autotune_app.viewer.source import FrameSource, ViewFrame, on_off
from autotune_app.viewer.surfaces import OffscreenSurface, SceneView, WindowSurface
from raytracer.camera import Camera

TARGET_STEP = 1.25  # factor per +/- press
TARGET_LIMITS = (0.001, 10.0)  # seconds
# number keys 1, 2, ... pick the controllers in the registry's order
CONTROLLER_KEYS = {glfw.KEY_1 + i: name for i, name in enumerate(CONTROLLERS)}
assert len(CONTROLLER_KEYS) <= 9, "more controllers than number keys"
FLY_KEYS = {  # key -> (forward, right, up)
    glfw.KEY_W: (1, 0, 0),
    glfw.KEY_UP: (1, 0, 0),
    glfw.KEY_S: (-1, 0, 0),
    glfw.KEY_DOWN: (-1, 0, 0),
    glfw.KEY_A: (0, -1, 0),
    glfw.KEY_LEFT: (0, -1, 0),
    glfw.KEY_D: (0, 1, 0),
    glfw.KEY_RIGHT: (0, 1, 0),
    glfw.KEY_E: (0, 0, 1),
    glfw.KEY_Q: (0, 0, -1),
}
HELP_TOP = [
    "mouse drag     orbit",
    "W A S D/arrows fly   Q/E down/up",
    "scroll         dolly",
    "R              reset camera",
    "+ / -          target frame time",
    "T              tuning on/off",
    " / ".join(str(i + 1) for i in range(len(CONTROLLERS))).ljust(15)
    + "/".join(CONTROLLER_NAMES.values()),
]
HELP_BOTTOM = [  # a renderer's own keys go between the two
    "O              overlay on/off",
    "P              screenshot",
    "H              this help",
    "Esc            quit",
]
EMA = 0.1  # smoothing of the fps
DISPLAY_WINDOW = 30  # the overlay shows the median display time of this many recent frames


class Viewer:
    """The main loop: input -> camera -> governed render -> texture + overlay -> present/record."""

    def __init__(
        self,
        surface: WindowSurface | OffscreenSurface,
        source: FrameSource,
        controller: str,
        path: list[Camera] | None = None,
        frames: int | None = None,
        recorder: Recorder | None = None,
        screenshot_dir: Path = Path("."),
    ) -> None:
        self.surface, self.ctx, self.source = surface, surface.ctx, source
        self.controller = controller
        self.path, self.max_frames = path, frames
        self.recorder, self.screenshot_dir = recorder, screenshot_dir
        self.screenshot_shown = screenshot_dir  # where the user will find it (after the run)
        self.controls = CameraController(source.home, source.extent)
        self.help = HELP_TOP + source.help + HELP_BOTTOM
        self.scene_view = SceneView(self.ctx)
        self.overlay = Overlay(self.ctx)
        self.history = FrameHistory()
        self.held: set[int] = set()
        self.show_help, self.show_overlay = False, True
        self.screenshot_pending = self.quit = False
        self.frame_index = 0
        self.fps = math.nan
        self.display_times: deque[float] = deque(maxlen=DISPLAY_WINDOW)
        self.interval = FrameInterval(source.target_seconds)
        self.logs: list[Any] = []  # the source's log of every frame, for the summary
        self._dragging = False
        self._cursor: tuple[float, float] | None = None
        self._last_time: float | None = None
        self._start = time.perf_counter()
        if isinstance(surface, WindowSurface):
            w = surface.window
            glfw.set_key_callback(w, self.key_callback)
            glfw.set_mouse_button_callback(w, self.mouse_button_callback)
            glfw.set_cursor_pos_callback(w, self.cursor_callback)
            glfw.set_scroll_callback(w, self.scroll_callback)

    # ---- input ----------------------------------------------------------------------------

    def key_callback(self, _window, key: int, _scancode: int, action: int, mods: int) -> None:
        """glfw key callback: held keys for flying, presses (and repeats for +/-) for commands."""
        if action == glfw.RELEASE:
            self.held.discard(key)
            return
        if action == glfw.PRESS:
            self.held.add(key)
        if key in (glfw.KEY_EQUAL, glfw.KEY_KP_ADD):
            self.set_target(self.interval.target_seconds * TARGET_STEP)
        elif key in (glfw.KEY_MINUS, glfw.KEY_KP_SUBTRACT):
            self.set_target(self.interval.target_seconds / TARGET_STEP)
        elif action != glfw.PRESS:
            return
        elif key == glfw.KEY_ESCAPE:
            self.quit = True
        elif key == glfw.KEY_T:
            self.source.tuning = not self.source.tuning
        elif key in CONTROLLER_KEYS:
            self.controller = CONTROLLER_KEYS[key]
            self.source.set_controller(self.controller)
        elif self.source.key(key, mods):
            self.held.discard(key)  # e.g. Shift+S is not S (fly backward)
        elif key == glfw.KEY_P:
            self.screenshot_pending = True
        elif key == glfw.KEY_R:
            self.controls.reset()
        elif key == glfw.KEY_H:
            self.show_help = not self.show_help
        elif key == glfw.KEY_O:
            self.show_overlay = not self.show_overlay

    def set_target(self, seconds: float) -> None:
        """The target interval between shown frames (the renderer's follows each frame)."""
        self.interval.target_seconds = min(max(seconds, TARGET_LIMITS[0]), TARGET_LIMITS[1])

    def mouse_button_callback(self, _window, button: int, action: int, _mods: int) -> None:
        if button == glfw.MOUSE_BUTTON_LEFT:
            self._dragging = action == glfw.PRESS

    def cursor_callback(self, _window, x: float, y: float) -> None:
        """Orbit by the cursor's movement while the left button is held."""
        if self._dragging and self._cursor is not None:
            self.controls.orbit(x - self._cursor[0], y - self._cursor[1])
        self._cursor = (x, y)

    def scroll_callback(self, _window, _dx: float, dy: float) -> None:
        self.controls.dolly(dy)

    # ---- frame ----------------------------------------------------------------------------

    def _camera(self, seconds: float) -> Camera:
        if self.path is not None:
            return self.path[self.frame_index]
        move = np.sum([FLY_KEYS[k] for k in self.held if k in FLY_KEYS], axis=0)
        if np.any(move):
            self.controls.fly(*np.clip(move, -1, 1), seconds)
        return self.controls.camera()

    def status_lines(self, frame: ViewFrame, width: int, height: int) -> list[tuple[str, tuple]]:
        """The overlay's text: rates, times, knobs, model error, display cost."""
        src = self.source
        replay = f"  replay {self.frame_index + 1}/{len(self.path)}" if self.path else ""
        err, cerr = (self.history.relative_error(k) for k in ("predicted", "corrected"))
        display = float(np.median(self.display_times)) if self.display_times else math.nan
        target = self.interval.target_seconds
        return [
            (
                f"{src.label} {width}x{height}  {self.fps:.1f} fps  controller "
                f"{CONTROLLER_NAMES[self.controller]}  tuning {on_off(src.tuning)}{replay}",
                WHITE,
            ),
            (
                f"target {target * 1e3:.1f} ms between frames: renderer "
                f"{src.target_seconds * 1e3:.1f} + rest {self.interval.rest * 1e3:.1f}  "
                f"measured {frame.measured * 1e3:.1f}  predicted {frame.predicted * 1e3:.1f}  "
                f"corrected {frame.corrected * 1e3:.1f}",
                WHITE,
            ),
            (frame.knobs, WHITE),
            (
                f"model error {err:.0%}  corrected {cerr:.0%}  display {display * 1e3:.1f} ms "
                f"({display / target:.0%} of target)",
                WHITE,
            ),
            ("H: keys", GREY),
        ]

    def show_message(self, text: str) -> None:
        """A frame with only ``text`` and the empty graph (while the renderer prepares, e.g.
        calibrates); it keeps a window responsive, and Esc or closing it ends the run after."""
        self.surface.poll()
        width, height = self.surface.size
        if width == 0 or height == 0:
            return
        self.surface.fbo.use()
        self.ctx.viewport = (0, 0, width, height)
        self.surface.fbo.clear(0.0, 0.0, 0.0, 1.0)
        self.overlay.draw(width, height, self.history, [(text, WHITE)])
        self.surface.present()

    def step(self) -> bool:
        """Render, display and record one frame; False once the run is over."""
        clock = self.interval
        clock.begin()
        with clock.part("poll"):
            self.surface.poll()
        if self.quit or self.surface.should_close():
            return False
        if self.surface.resized:
            width, height = self.surface.resized
            self.surface.resized = None
            if width > 0 and height > 0:
                self.source.resize(width, height)
        width, height = self.surface.size
        if width == 0 or height == 0:  # minimised: nothing to draw
            clock.skip()
            time.sleep(0.05)
            return True
        now = time.perf_counter()
        seconds = 0.0 if self._last_time is None else now - self._last_time
        if seconds > 0:
            self.fps = 1 / seconds if math.isnan(self.fps) else (1 - EMA) * self.fps + EMA / seconds
        self._last_time = now
        camera = self._camera(seconds)
        self.source.target_seconds = render_target = clock.render_target
        with clock.part("renderer"):
            frame = self.source.render(camera)
        self.history.push(PlotPoint(render_target, frame.measured, frame.predicted,
                                    frame.corrected))
        self.logs.append(frame.log)

        with clock.part("display"):
            self.draw(frame, width, height)
        self.display_times.append(clock.parts["display"])
        with clock.part("record"):
            if self.recorder is not None:  # the PNG is written on the recorder's thread
                self.recorder.write(self.surface.read(), self.frame_index)
            self.screenshot()
        with clock.part("present"):
            self.surface.present()
        times = clock.shown(frame.measured)
        if self.recorder is not None:
            self.recorder.add(self._row(frame, render_target, times, width, height), camera)
        self.frame_index += 1
        limit = min(self.max_frames or math.inf, len(self.path) if self.path else math.inf)
        return self.frame_index < limit

    def draw(self, frame: ViewFrame, width: int, height: int) -> None:
        """The frame as a texture, the overlay on it, finished on the GPU."""
        self.scene_view.draw(frame.image, self.surface.fbo, (width, height))
        self.surface.fbo.use()
        self.ctx.viewport = (0, 0, width, height)
        if self.show_overlay:
            self.overlay.draw(
                width,
                height,
                self.history,
                self.status_lines(frame, width, height),
                self.help if self.show_help else None,
            )
        self.ctx.finish()

    def screenshot(self) -> None:
        """The shown frame as a PNG, if P was pressed."""
        if self.screenshot_pending:
            self.screenshot_pending = False
            path = free_name(self.screenshot_dir / f"screenshot_{self.frame_index:05d}.png")
            save_png(self.surface.read(), path)
            print(f"screenshot saved to {self.screenshot_shown / path.name}")

    def _row(self, frame: ViewFrame, render_target: float, times: dict[str, float],
             width: int, height: int) -> dict:
        return {
            "frame": self.frame_index,
            "wall_s": time.perf_counter() - self._start,
            "target_ms": self.interval.target_seconds * 1e3,
            "render_target_ms": render_target * 1e3,
            "measured_ms": frame.measured * 1e3,
            "predicted_ms": frame.predicted * 1e3,
            "corrected_ms": frame.corrected * 1e3,
            "probe_ms": frame.probe_seconds * 1e3,
            **times,
            **frame.columns,
            "controller": self.controller,
            "tuning": int(self.source.tuning),
            "width": width,
            "height": height,
        }

    def run(self) -> None:
        while self.step():
            pass

