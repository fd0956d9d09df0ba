"""Where the viewer draws: a glfw window, or an offscreen EGL framebuffer with ``--headless``.

Both hold an OpenGL 3.3 core context; :class:`SceneView` shows a rendered image on either.
"""

from __future__ import annotations

import os
import sys

import glfw
import moderngl
import numpy as np

from autotune_app import limits
from autotune_app.viewer.errors import ViewerError

GL_VERSION = 330

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
    try:
        limits.check_gl_size(ctx, width, height)  # looked up per call: tests replace it
    except limits.LimitError as exc:
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

