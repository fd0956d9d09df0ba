"""The viewer application: a glfw window (or an offscreen EGL framebuffer), input, main loop.

Every frame: a tuner-governed renderer (a :class:`~autotune_app.viewer.source.FrameSource`:
the ray tracer, or the distributed volume renderer) renders the view, the image is uploaded
as a texture and drawn with the overlay. Upload + overlay are timed (``ctx.finish()``
included) so the display's share of the frame budget is visible in the overlay and in
``--record``'s run.json.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import glfw
import moderngl
import numpy as np

from autotune.controllers import CONTROLLER_NAMES, CONTROLLERS
from autotune_app import options as opt
from autotune_app.report import tracking_report
from autotune_app.viewer import ViewerError
from autotune_app.viewer.controls import CameraController
from autotune_app.viewer.overlay import GREY, WHITE, FrameHistory, Overlay, PlotPoint
from autotune_app.viewer.record import (
    Recorder,
    RecordError,
    columns,
    free_name,
    record_folder,
    save_png,
)
from autotune_app.viewer.source import (
    FAILED,
    FINISHED,
    INTERRUPTED,
    FrameSource,
    ViewFrame,
    on_off,
)
from common.atomic_files import output_dir
from raytracer.camera import Camera, load_path

GL_VERSION = 330
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

_SCENE_VS = """
#version 330
in vec2 in_pos;
out vec2 uv;
void main() {
    uv = in_pos * 0.5 + 0.5;
    gl_Position = vec4(in_pos, 0.0, 1.0);
}
"""
_SCENE_FS = """
#version 330
uniform sampler2D image;
in vec2 uv;
out vec4 frag;
void main() { frag = vec4(texture(image, uv).rgb, 1.0); }
"""


class SceneView:
    """Shows the ray-traced image: a framebuffer blit when sizes match, else a stretched quad.

    The blit is the cheap path (a copy, no shading): it keeps the display's share of the
    frame small even on a software OpenGL. Rows are flipped on upload (GL rows go bottom up).
    """

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.program = ctx.program(vertex_shader=_SCENE_VS, fragment_shader=_SCENE_FS)
        quad = np.array([-1, -1, 1, -1, -1, 1, 1, 1], np.float32)
        self.vao = ctx.vertex_array(self.program, [(ctx.buffer(quad.tobytes()), "2f", "in_pos")])
        self.texture: moderngl.Texture | None = None
        self.source: moderngl.Framebuffer | None = None

    def draw(self, image: np.ndarray, target: moderngl.Framebuffer, size: tuple[int, int]) -> None:
        """Upload ``image`` (H, W, 3|4 uint8, top row first) and show it over all of ``target``
        (``size``: its current size; the default framebuffer's own record of it goes stale)."""
        h, w, c = image.shape
        if self.texture is None or (*self.texture.size, self.texture.components) != (w, h, c):
            if self.texture is not None:
                self.source.release()
                self.texture.release()
            self.texture = self.ctx.texture((w, h), c)
            self.texture.filter = (moderngl.LINEAR, moderngl.LINEAR)
            self.source = self.ctx.framebuffer(color_attachments=[self.texture])
        self.texture.write(np.ascontiguousarray(image[::-1]))
        if size == (w, h):
            self.ctx.copy_framebuffer(target, self.source)
            return
        target.use()
        self.ctx.viewport = (0, 0, *size)
        self.texture.use(location=0)
        self.program["image"].value = 0
        self.vao.render(moderngl.TRIANGLE_STRIP)


def _read_rgb(fbo: moderngl.Framebuffer, size: tuple[int, int]) -> np.ndarray:
    """The framebuffer's ``size`` pixels as an (H, W, 3) uint8 image, top row first."""
    w, h = size
    data = np.frombuffer(fbo.read((0, 0, w, h), components=3, alignment=1), np.uint8)
    data = data.reshape(h, w, 3)
    return data[::-1].copy()


class WindowSurface:
    """A glfw window with an OpenGL 3.3 core context (the Viewer installs the input callbacks)."""

    def __init__(self, width: int, height: int, title: str) -> None:
        if sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        ):
            raise ViewerError(
                "no display: DISPLAY is not set. Use --headless to render "
                "offscreen, or run under a virtual X server, Xvfb "
                "(e.g. xvfb-run -s '-screen 0 1280x720x24' autotune view ...)"
            )
        glfw.ERROR_REPORTING = "raise"  # setup failures become exceptions with glfw's reason
        try:
            self._open(width, height, title)
        finally:
            glfw.ERROR_REPORTING = "log"  # from here on, glfw trouble must not stop the loop
        glfw.swap_interval(0)  # never wait for vsync: the tuner owns the frame time
        self.fbo = self.ctx.screen
        self.resized: tuple[int, int] | None = None
        glfw.set_framebuffer_size_callback(self.window, self._on_resize)

    def _open(self, width: int, height: int, title: str) -> None:
        try:
            glfw.init()
        except glfw.GLFWError as exc:
            raise ViewerError(
                f"cannot open the display ({_glfw_message(exc)}). Use --headless "
                f"to render offscreen, or run under Xvfb"
            ) from None
        glfw.window_hint(glfw.CONTEXT_VERSION_MAJOR, 3)
        glfw.window_hint(glfw.CONTEXT_VERSION_MINOR, 3)
        glfw.window_hint(glfw.OPENGL_PROFILE, glfw.OPENGL_CORE_PROFILE)
        glfw.window_hint(glfw.OPENGL_FORWARD_COMPAT, True)
        try:
            self.window = glfw.create_window(width, height, title, None, None)
            glfw.make_context_current(self.window)
            self.ctx = moderngl.create_context(require=GL_VERSION)
        except Exception as exc:  # glfw.GLFWError, or moderngl's plain Exception
            glfw.terminate()
            msg = _glfw_message(exc) if isinstance(exc, glfw.GLFWError) else str(exc)
            raise ViewerError(
                f"no OpenGL 3.3 core context available ({msg}); the viewer needs "
                f"OpenGL 3.3 (update the graphics driver, or use --headless)"
            ) from None
        try:
            _check_gl_size(self.ctx, width, height)
        except ViewerError:
            glfw.terminate()
            raise

    def _on_resize(self, _window, width: int, height: int) -> None:
        self.resized = (width, height)

    @property
    def size(self) -> tuple[int, int]:
        return glfw.get_framebuffer_size(self.window)

    def poll(self) -> None:
        glfw.poll_events()

    def should_close(self) -> bool:
        return bool(glfw.window_should_close(self.window))

    def present(self) -> None:
        glfw.swap_buffers(self.window)

    def read(self) -> np.ndarray:
        return _read_rgb(self.fbo, self.size)

    def close(self) -> None:
        glfw.terminate()


def _check_gl_size(ctx: moderngl.Context, width: int, height: int) -> None:
    from autotune_app.limits import LimitError, check_gl_size

    try:
        check_gl_size(ctx, width, height)
    except LimitError as exc:
        raise ViewerError(str(exc)) from None


def _glfw_message(exc: glfw.GLFWError) -> str:
    text = str(exc)
    return text.split(") ", 1)[-1].strip("b'\"") if ") " in text else text


class OffscreenSurface:
    """An EGL context rendering into a framebuffer object (``--headless``)."""

    def __init__(self, width: int, height: int) -> None:
        try:
            self.ctx = moderngl.create_standalone_context(require=GL_VERSION, backend="egl")
        except Exception as exc:  # moderngl/glcontext raise plain Exception
            raise ViewerError(
                f"no headless OpenGL 3.3 context (EGL): {exc}. Install Mesa's EGL "
                f"(libegl1, libgl1-mesa-dri) or run with a display"
            ) from None
        try:
            _check_gl_size(self.ctx, width, height)
        except ViewerError:
            self.ctx.release()
            raise
        self.fbo = self.ctx.framebuffer(color_attachments=[self.ctx.renderbuffer((width, height))])
        self.size = (width, height)
        self.resized: tuple[int, int] | None = None

    def poll(self) -> None:
        pass

    def should_close(self) -> bool:
        return False

    def present(self) -> None:
        pass

    def read(self) -> np.ndarray:
        return _read_rgb(self.fbo, self.size)

    def close(self) -> None:
        self.ctx.release()


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
            self.set_target(self.source.target_seconds * TARGET_STEP)
        elif key in (glfw.KEY_MINUS, glfw.KEY_KP_SUBTRACT):
            self.set_target(self.source.target_seconds / TARGET_STEP)
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
        self.source.target_seconds = min(max(seconds, TARGET_LIMITS[0]), TARGET_LIMITS[1])

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
        share = display / frame.measured if frame.measured > 0 else math.nan
        return [
            (
                f"{src.label} {width}x{height}  {self.fps:.1f} fps  controller "
                f"{CONTROLLER_NAMES[self.controller]}  tuning {on_off(src.tuning)}{replay}",
                WHITE,
            ),
            (
                f"target {src.target_seconds * 1e3:.1f} ms  measured {frame.measured * 1e3:.1f}  "
                f"predicted {frame.predicted * 1e3:.1f}  corrected {frame.corrected * 1e3:.1f}",
                WHITE,
            ),
            (frame.knobs, WHITE),
            (
                f"model error {err:.0%}  corrected {cerr:.0%}  display {display * 1e3:.1f} ms "
                f"({share:.1%} of frame, {display / src.target_seconds:.0%} of target)",
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
            time.sleep(0.05)
            return True
        now = time.perf_counter()
        seconds = 0.0 if self._last_time is None else now - self._last_time
        if seconds > 0:
            self.fps = 1 / seconds if math.isnan(self.fps) else (1 - EMA) * self.fps + EMA / seconds
        self._last_time = now
        camera = self._camera(seconds)
        frame = self.source.render(camera)
        self.history.push(
            PlotPoint(self.source.target_seconds, frame.measured, frame.predicted, frame.corrected)
        )
        self.logs.append(frame.log)

        start = time.perf_counter()
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
        display = time.perf_counter() - start
        self.display_times.append(display)

        if self.screenshot_pending:
            self.screenshot_pending = False
            path = free_name(self.screenshot_dir / f"screenshot_{self.frame_index:05d}.png")
            save_png(self.surface.read(), path)
            print(f"screenshot saved to {self.screenshot_shown / path.name}")
        if self.recorder is not None:
            self.recorder.add(self._row(frame, display, width, height), camera, self.surface.read())
        self.surface.present()
        self.frame_index += 1
        limit = min(self.max_frames or math.inf, len(self.path) if self.path else math.inf)
        return self.frame_index < limit

    def _row(self, frame: ViewFrame, display: float, width: int, height: int) -> dict:
        return {
            "frame": self.frame_index,
            "wall_s": time.perf_counter() - self._start,
            "target_ms": self.source.target_seconds * 1e3,
            "measured_ms": frame.measured * 1e3,
            "predicted_ms": frame.predicted * 1e3,
            "corrected_ms": frame.corrected * 1e3,
            "display_ms": display * 1e3,
            "probe_ms": frame.probe_seconds * 1e3,
            **frame.columns,
            "controller": self.controller,
            "tuning": int(self.source.tuning),
            "width": width,
            "height": height,
        }

    def run(self) -> None:
        while self.step():
            pass


def prepare(args: argparse.Namespace) -> tuple[list[Camera] | None, Path | None]:
    """Checks before any window or renderer: the camera path (``--path``), that a headless run
    ends, the ``--record`` folder. Returns the path's cameras and the folder to record to."""
    path = None
    if args.path:
        try:
            path = load_path(args.path)
        except ValueError as exc:
            raise ViewerError(str(exc)) from None
    if args.headless and not (args.frames or path):
        raise ViewerError("--headless needs --frames N or --path FILE to know when to stop")
    record_dir = record_folder(args.record, getattr(args, "force", False)) if args.record else None
    return path, record_dir


def open_surface(args: argparse.Namespace, title: str) -> WindowSurface | OffscreenSurface:
    """The window, or with ``--headless`` an offscreen EGL framebuffer, of the asked size."""
    if args.headless:
        return OffscreenSurface(args.width, args.height)
    return WindowSurface(args.width, args.height, title)


def show(
    args: argparse.Namespace,
    surface: WindowSurface | OffscreenSurface,
    source: FrameSource,
    path: list[Camera] | None,
    record_dir: Path | None,
) -> dict | None:
    """Run the viewer on ``surface`` (closed at the end) until Esc, the window closing,
    ``--frames`` or the end of ``--path``; print a summary of how well the target was held;
    returns the --record summary if any. ``source.finish`` is called however the run ends.
    Ctrl-C ends the run like Esc (the recording is kept), then raises KeyboardInterrupt."""
    interrupted = finished = False
    viewer = None
    try:
        with contextlib.ExitStack() as stack:
            work = None
            if record_dir is not None:
                try:
                    work = stack.enter_context(output_dir(record_dir))
                except OSError as exc:
                    raise RecordError(f"cannot record: {exc}") from None
            recorder = Recorder(work, columns(source.fields)) if work is not None else None
            viewer = Viewer(
                surface, source, args.controller, path, args.frames, recorder,
                work if work is not None else Path("."),
            )
            if record_dir is not None:
                viewer.screenshot_shown = record_dir
            try:
                source.start(viewer.show_message)
                viewer.run()
            except KeyboardInterrupt:
                interrupted = True
            finished = True
            source.finish(INTERRUPTED if interrupted else FINISHED)
            figures, lines = source.summary(viewer.logs) if viewer.logs else ({}, "")
            info = {**_run_info(args, surface), **source.run_info(), **figures}
            summary = recorder.close(info) if recorder is not None else None
    finally:
        if not finished:
            source.finish(FAILED)
        size = surface.size  # a closed window's size reads 0x0
        surface.close()
    if viewer.logs:
        print(
            f"autotune view: {source.label} at {size[0]}x{size[1]} on "
            f"{source.device}, controller {viewer.controller}, target "
            f"{source.target_seconds * 1e3:.1f} ms at the end\n"
            f"{tracking_report(figures)}{lines}"
        )
    if record_dir is not None:
        print(f"recorded to {record_dir}/")
    if interrupted:
        raise KeyboardInterrupt
    return summary


def run(args: argparse.Namespace) -> dict | None:
    """``autotune view`` of a ray-traced scene (see :func:`show`)."""
    from autotune_app.viewer.tracer_source import load_tracer_source

    path, record_dir = prepare(args)
    surface = open_surface(args, f"autotune view: {args.scene}")
    try:  # a window may have been resized
        source = load_tracer_source(args, *surface.size, opt.target_seconds(args))
    except BaseException:
        surface.close()
        raise
    return show(args, surface, source, path, record_dir)


def _run_info(args: argparse.Namespace, surface: WindowSurface | OffscreenSurface) -> dict:
    """What run.json says about the run besides the renderer and per-frame statistics."""
    return {
        "size": list(surface.size),
        "headless": args.headless,
        "target_ms_at_start": opt.target_seconds(args) * 1e3,
        "controller_at_start": args.controller,
        "path": args.path,
        "gl_renderer": surface.ctx.info["GL_RENDERER"],
    }
