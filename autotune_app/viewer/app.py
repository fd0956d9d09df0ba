"""``autotune view`` of a ray-traced scene, and the steps every view (scene or volume) shares.

The checks before any window (:func:`prepare`), the window or offscreen surface
(:func:`open_surface`), and the run of :class:`~autotune_app.viewer.main_loop.Viewer` with its
summary and recording (:func:`show`).
"""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path

from autotune_app import options as opt
from autotune_app.report import tracking_report
from autotune_app.viewer.errors import ViewerError
from autotune_app.viewer.main_loop import Viewer
from autotune_app.viewer.record import Recorder, RecordError, columns, record_folder
from autotune_app.viewer.source import FAILED, FINISHED, INTERRUPTED, FrameSource
from autotune_app.viewer.surfaces import OffscreenSurface, WindowSurface
from autotune_app.viewer.tracer_source import load_tracer_source
from common.atomic_files import output_dir
from raytracer.camera import Camera, load_path


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
            if recorder is not None:
                stack.callback(recorder.stop)  # before the folder is kept or discarded
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
            f"{viewer.interval.target_seconds * 1e3:.1f} ms between shown frames at the end "
            f"(the renderer's {source.target_seconds * 1e3:.1f})\n"
            f"{tracking_report(figures)}{lines}"
        )
    if record_dir is not None:
        print(f"recorded to {record_dir}/")
    if interrupted:
        raise KeyboardInterrupt
    return summary


def run(args: argparse.Namespace) -> dict | None:
    """``autotune view`` of a ray-traced scene (see :func:`show`)."""
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
