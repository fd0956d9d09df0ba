"""Limits a command checks before the work, so a value it accepted never ends in a traceback."""

from __future__ import annotations

from typing import Any

# What the tracer allocates per pixel (raytracer/mesh/tracer.py): hits 16 B, visibility 4 B,
# occlusion 4 B, image 4 B, and 8 B per traced phase with --counters.
HIT_BYTES_PER_PIXEL = 16
BYTES_PER_PIXEL = 28
COUNTER_BYTES_PER_PIXEL = 8 * 3
MIB = 1 << 20


class LimitError(ValueError):
    """A size the device cannot handle; the message says which limit and what to do."""


def check_device_memory(tracer: Any, width: int, height: int) -> None:
    """Refuse an image size whose buffers exceed the OpenCL device's limits
    (CL_DEVICE_MAX_MEM_ALLOC_SIZE for one buffer, CL_DEVICE_GLOBAL_MEM_SIZE in all)."""
    device = tracer.context.devices[0]
    name = tracer.device_info.name
    n = int(width) * int(height)
    largest = HIT_BYTES_PER_PIXEL * n
    total = (BYTES_PER_PIXEL + (COUNTER_BYTES_PER_PIXEL if tracer.counters else 0)) * n
    max_alloc, global_mem = int(device.max_mem_alloc_size), int(device.global_mem_size)
    if largest > max_alloc:
        raise LimitError(
            f"image size {width}x{height} needs a {largest / MIB:.0f} MiB buffer but the device "
            f"{name} allows at most {max_alloc / MIB:.0f} MiB in one buffer "
            f"(CL_DEVICE_MAX_MEM_ALLOC_SIZE); choose a smaller --width/--height")
    if total > global_mem:
        raise LimitError(
            f"image size {width}x{height} needs {total / MIB:.0f} MiB of device memory but "
            f"{name} has {global_mem / MIB:.0f} MiB; choose a smaller --width/--height")


def check_gl_size(ctx: Any, width: int, height: int) -> None:
    """Refuse a framebuffer the OpenGL driver cannot make (GL_MAX_RENDERBUFFER_SIZE,
    GL_MAX_TEXTURE_SIZE, GL_MAX_VIEWPORT_DIMS)."""
    info = ctx.info
    limit = min(int(info.get("GL_MAX_RENDERBUFFER_SIZE", 1 << 30)),
                int(info.get("GL_MAX_TEXTURE_SIZE", 1 << 30)),
                *(int(v) for v in info.get("GL_MAX_VIEWPORT_DIMS", (1 << 30,))))
    if width > limit or height > limit:
        raise LimitError(
            f"size {width}x{height} is larger than this OpenGL driver allows ({limit}x{limit}: "
            f"GL_MAX_RENDERBUFFER_SIZE / GL_MAX_TEXTURE_SIZE); choose a smaller "
            f"--width/--height")
