"""The viewer's overlay: a frame-time graph and status text, drawn with moderngl over the frame.

Geometry is built in pixel coordinates (y down) by pure numpy functions, so layout is testable
without OpenGL; :class:`Overlay` only uploads it. Text comes from a glyph atlas that Pillow
rasterises once per font size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import moderngl
import numpy as np
from PIL import Image, ImageDraw, ImageFont

HISTORY = 300  # frames shown in the graph
ERROR_WINDOW = 30  # frames averaged for the model error
CHARSET = "".join(chr(c) for c in range(32, 127))
FONT_FILES = ("DejaVuSansMono.ttf", "DejaVuSans.ttf")

WHITE = (0.95, 0.95, 0.95, 1.0)
GREY = (0.7, 0.7, 0.7, 1.0)
PANEL = (0.0, 0.0, 0.0, 0.6)
SERIES = ("target", "measured", "predicted", "corrected")
SERIES_COLORS = {  # drawn in reverse order: the target line on top
    "target": (1.0, 0.8, 0.2, 1.0),
    "measured": WHITE,
    "predicted": (0.4, 0.65, 1.0, 1.0),
    "corrected": (0.35, 0.9, 0.45, 1.0),
}


@dataclass(frozen=True)
class PlotPoint:
    """One frame's times in seconds, as plotted."""

    target: float
    measured: float
    predicted: float
    corrected: float


class FrameHistory:
    """The last ``length`` frames' times (a ring buffer), and the model's recent relative error."""

    def __init__(self, length: int = HISTORY) -> None:
        self.length = length
        self._data = np.full((length, len(SERIES)), np.nan)
        self._count = 0

    def __len__(self) -> int:
        return min(self._count, self.length)

    def push(self, sample: PlotPoint) -> None:
        self._data[self._count % self.length] = [getattr(sample, name) for name in SERIES]
        self._count += 1

    def array(self) -> np.ndarray:
        """(n, 4) seconds, oldest frame first, columns in :data:`SERIES` order."""
        if self._count <= self.length:
            return self._data[: self._count]
        i = self._count % self.length
        return np.concatenate([self._data[i:], self._data[:i]])

    def series(self, name: str) -> np.ndarray:
        """One field of every stored sample, oldest first, in seconds."""
        return self.array()[:, SERIES.index(name)]

    def relative_error(self, name: str) -> float:
        """Mean |``name`` - measured| / measured over the last :data:`ERROR_WINDOW` frames."""
        value, measured = self.series(name)[-ERROR_WINDOW:], self.series("measured")[-ERROR_WINDOW:]
        ok = np.isfinite(value) & (measured > 0)
        return (
            float(np.mean(np.abs(value[ok] - measured[ok]) / measured[ok]))
            if ok.any()
            else math.nan
        )


# ---- geometry (pure) -------------------------------------------------------------------------


def rect_vertices(x: float, y: float, w: float, h: float, color) -> np.ndarray:
    """Two triangles covering a rectangle: (6, 6) float32 rows of ``x, y, r, g, b, a``."""
    corners = np.array([[x, y], [x + w, y], [x, y + h], [x, y + h], [x + w, y], [x + w, y + h]])
    return np.hstack([corners, np.tile(color, (6, 1))]).astype(np.float32)


def polyline_vertices(points: np.ndarray, width: float, color) -> np.ndarray:
    """A polyline ``width`` pixels thick as triangles (6 vertices per segment), rows as above."""
    points = np.asarray(points, np.float64)
    if len(points) < 2:
        return np.zeros((0, 6), np.float32)
    p0, p1 = points[:-1], points[1:]
    d = p1 - p0
    length = np.linalg.norm(d, axis=1, keepdims=True)
    d = np.divide(d, length, out=np.tile([1.0, 0.0], (len(d), 1)), where=length > 0)
    n = np.stack([-d[:, 1], d[:, 0]], axis=1) * (width / 2.0)
    quads = np.stack([p0 + n, p0 - n, p1 + n, p1 + n, p0 - n, p1 - n], axis=1).reshape(-1, 2)
    return np.hstack([quads, np.tile(color, (len(quads), 1))]).astype(np.float32)


def graph_scale(history: FrameHistory) -> float:
    """Top of the graph's y axis in seconds: a 1-2-5 step above every plotted value."""
    values = history.array()
    values = values[np.isfinite(values)]
    top = float(values.max()) * 1.1 if values.size else 0.0
    if top <= 0:
        return 0.001
    step = 10.0 ** math.floor(math.log10(top))
    return next(m * step for m in (1, 2, 5, 10) if m * step >= top)


def graph_vertices(
    history: FrameHistory, rect: tuple[float, float, float, float], y_max: float, line_width: float
) -> np.ndarray:
    """Panel and one polyline per series; the newest frame sits at the right edge."""
    x, y, w, h = rect
    parts = [rect_vertices(x, y, w, h, PANEL)]
    data = history.array()
    n = len(data)
    if n >= 2:
        xs = x + w - (n - 1 - np.arange(n)) * (w / (history.length - 1))
        for name, color in reversed(SERIES_COLORS.items()):
            v = data[:, SERIES.index(name)]
            ok = np.isfinite(v)
            ys = y + h - np.clip(v[ok] / y_max, 0.0, 1.0) * h
            parts.append(polyline_vertices(np.stack([xs[ok], ys], axis=1), line_width, color))
    return np.concatenate(parts)


class FontAtlas:
    """ASCII glyphs rasterised by Pillow into one coverage image, one fixed-size cell each."""

    def __init__(self, size: int) -> None:
        self.size = size
        font = _load_font(size)
        boxes = [font.getbbox(ch) for ch in CHARSET]
        top = min(b[1] for b in boxes)
        self.cell_h = max(b[3] for b in boxes) - top + 1
        self.cell_w = max(b[2] for b in boxes) + 2
        self.line_height = self.cell_h + max(2, size // 6)
        cols = 16
        rows = math.ceil(len(CHARSET) / cols)
        image = Image.new("L", (cols * self.cell_w, rows * self.cell_h), 0)
        draw = ImageDraw.Draw(image)
        self.index = {ch: i for i, ch in enumerate(CHARSET)}
        for i, ch in enumerate(CHARSET):
            draw.text(
                ((i % cols) * self.cell_w, (i // cols) * self.cell_h - top), ch, fill=255, font=font
            )
        self.image = np.asarray(image, np.uint8)
        self._advances = np.array([round(font.getlength(ch)) for ch in CHARSET], np.float64)
        w, h = image.size
        col, row = np.arange(len(CHARSET)) % cols, np.arange(len(CHARSET)) // cols
        self._uv = np.stack(
            [
                col * self.cell_w / w,
                row * self.cell_h / h,
                (col + 1) * self.cell_w / w,
                (row + 1) * self.cell_h / h,
            ],
            axis=1,
        )

    def _codes(self, text: str) -> np.ndarray:
        unknown = self.index["?"]
        return np.array([self.index.get(ch, unknown) for ch in text], np.int64)

    def text_width(self, text: str) -> float:
        return float(self._advances[self._codes(text)].sum())

    def text_vertices(self, items: list[tuple[str, float, float, tuple]]) -> np.ndarray:
        """Textured quads for (text, x, y, color) items, (x, y) the text's top-left, in one
        vectorized pass: rows ``x, y, u, v, r, g, b, a``."""
        codes = self._codes("".join(text for text, *_ in items))
        if not len(codes):
            return np.zeros((0, 8), np.float32)
        item = np.repeat(np.arange(len(items)), [len(text) for text, *_ in items])
        xs, ys = (np.round([it[k] for it in items]) for k in (1, 2))
        colors = np.array([it[3] for it in items], np.float64)
        advance = self._advances[codes]
        before = np.cumsum(advance) - advance  # pen offset from the first item's start
        first = np.searchsorted(item, np.arange(len(items)))  # each item's first character
        pens = xs[item] + before - before[np.minimum(first, len(codes) - 1)][item]
        keep = codes != self.index[" "]
        codes, pens, item = codes[keep], pens[keep], item[keep]
        u0, v0, u1, v1 = self._uv[codes].T
        x0, x1 = pens, pens + self.cell_w
        y0 = ys[item]
        y1 = y0 + self.cell_h
        out = np.empty((len(codes), 6, 8), np.float32)
        for k, corner in enumerate(
            [
                (x0, y0, u0, v0),
                (x1, y0, u1, v0),
                (x0, y1, u0, v1),
                (x0, y1, u0, v1),
                (x1, y0, u1, v0),
                (x1, y1, u1, v1),
            ]
        ):
            out[:, k, :4] = np.stack(corner, axis=1)
        out[:, :, 4:] = colors[item][:, None, :]
        return out.reshape(-1, 8)


def _load_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu (monospace first) if installed, else Pillow's bundled default font."""
    for name in FONT_FILES:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default(size=size)


def font_size_for(height: int) -> int:
    """Text height in pixels for a framebuffer ``height``: 15 px at 720p, never below 10."""
    return max(10, min(28, round(height / 48)))


# ---- GL ----------------------------------------------------------------------------------------

_SOLID_VS = """
#version 330
uniform vec2 viewport;
in vec2 in_pos;
in vec4 in_color;
out vec4 color;
void main() {
    color = in_color;
    gl_Position = vec4(in_pos.x / viewport.x * 2.0 - 1.0, 1.0 - in_pos.y / viewport.y * 2.0, 0, 1);
}
"""
_SOLID_FS = """
#version 330
in vec4 color;
out vec4 frag;
void main() { frag = color; }
"""
_TEXT_VS = """
#version 330
uniform vec2 viewport;
in vec2 in_pos;
in vec2 in_uv;
in vec4 in_color;
out vec2 uv;
out vec4 color;
void main() {
    uv = in_uv;
    color = in_color;
    gl_Position = vec4(in_pos.x / viewport.x * 2.0 - 1.0, 1.0 - in_pos.y / viewport.y * 2.0, 0, 1);
}
"""
_TEXT_FS = """
#version 330
uniform sampler2D atlas;
in vec2 uv;
in vec4 color;
out vec4 frag;
void main() { frag = vec4(color.rgb, color.a * texture(atlas, uv).r); }
"""


class _Stream:
    """A vertex array over a growable dynamic buffer, refilled every frame."""

    def __init__(
        self, ctx: moderngl.Context, program: moderngl.Program, layout: str, names: tuple[str, ...]
    ) -> None:
        self.ctx, self.program, self.layout, self.names = ctx, program, layout, names
        self.buffer = ctx.buffer(reserve=1 << 16, dynamic=True)
        self.vao = ctx.vertex_array(program, [(self.buffer, layout, *names)])

    def draw(self, vertices: np.ndarray) -> None:
        if not len(vertices):
            return
        data = np.ascontiguousarray(vertices, np.float32).tobytes()
        if len(data) > self.buffer.size:
            self.vao.release()
            self.buffer.release()
            self.buffer = self.ctx.buffer(reserve=2 * len(data), dynamic=True)
            self.vao = self.ctx.vertex_array(
                self.program, [(self.buffer, self.layout, *self.names)]
            )
        self.buffer.orphan()
        self.buffer.write(data)
        self.vao.render(moderngl.TRIANGLES, vertices=len(vertices))


class Overlay:
    """Draws the graph, status text and (optionally) the key list over the current framebuffer."""

    def __init__(self, ctx: moderngl.Context) -> None:
        self.ctx = ctx
        self.solid = ctx.program(vertex_shader=_SOLID_VS, fragment_shader=_SOLID_FS)
        self.text = ctx.program(vertex_shader=_TEXT_VS, fragment_shader=_TEXT_FS)
        self._solid = _Stream(ctx, self.solid, "2f 4f", ("in_pos", "in_color"))
        self._glyphs = _Stream(ctx, self.text, "2f 2f 4f", ("in_pos", "in_uv", "in_color"))
        self.font: FontAtlas | None = None
        self._atlas: moderngl.Texture | None = None

    def _ensure_font(self, height: int) -> FontAtlas:
        size = font_size_for(height)
        if self.font is None or self.font.size != size:
            self.font = FontAtlas(size)
            if self._atlas is not None:
                self._atlas.release()
            h, w = self.font.image.shape
            self._atlas = self.ctx.texture((w, h), 1, self.font.image.tobytes(), alignment=1)
            self._atlas.filter = (moderngl.NEAREST, moderngl.NEAREST)
        return self.font

    def geometry(
        self,
        width: int,
        height: int,
        history: FrameHistory,
        lines: list[tuple[str, tuple]],
        help_lines: list[str] | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """All solid triangles and glyph quads of one overlay frame (pixel coordinates)."""
        font = self._ensure_font(height)
        pad = max(4, font.size // 2)
        lh = font.line_height
        text_w = max(font.text_width(t) for t, _ in lines) + 2 * pad
        solid = [rect_vertices(pad, pad, text_w, len(lines) * lh + pad, PANEL)]
        items = [
            (text, 2 * pad, pad + pad // 2 + i * lh, color) for i, (text, color) in enumerate(lines)
        ]
        gw, gh = min(width - 2 * pad, max(width // 2, 300)), max(40, height // 4)
        gx, gy = pad, height - pad - gh
        y_max = graph_scale(history)
        solid.append(graph_vertices(history, (gx, gy, gw, gh), y_max, max(1.5, font.size / 8)))
        label = f"{y_max * 1e3:g} ms"
        items.append((label, gx + pad, gy + pad // 2, GREY))
        legend_w = sum(font.text_width(name) + pad for name in SERIES_COLORS)
        lx = gx + gw - pad
        ly = gy + pad // 2 + (lh if lx - legend_w < gx + 2 * pad + font.text_width(label) else 0)
        for name, color in reversed(SERIES_COLORS.items()):
            lx -= font.text_width(name) + pad
            items.append((name, lx, ly, color))
        if help_lines:
            hw = max(font.text_width(t) for t in help_lines) + 2 * pad
            hx = width - hw - pad
            solid.append(rect_vertices(hx, pad, hw, len(help_lines) * lh + pad, PANEL))
            items += [
                (text, hx + pad, pad + pad // 2 + i * lh, WHITE)
                for i, text in enumerate(help_lines)
            ]
        return np.concatenate(solid), font.text_vertices(items)

    def draw(
        self,
        width: int,
        height: int,
        history: FrameHistory,
        lines: list[tuple[str, tuple]],
        help_lines: list[str] | None = None,
    ) -> None:
        """Blend the overlay onto the bound framebuffer of size ``width`` x ``height``."""
        solid, glyphs = self.geometry(width, height, history, lines, help_lines)
        self.ctx.enable(moderngl.BLEND)
        self.ctx.blend_func = moderngl.SRC_ALPHA, moderngl.ONE_MINUS_SRC_ALPHA
        for program in (self.solid, self.text):
            program["viewport"].value = (float(width), float(height))
        self._solid.draw(solid)
        self._atlas.use(location=0)
        self.text["atlas"].value = 0
        self._glyphs.draw(glyphs)
        self.ctx.disable(moderngl.BLEND)
