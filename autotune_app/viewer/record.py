"""Recording a viewer run: frame PNGs, a CSV row of figures per frame, a JSON summary, the camera
path (so ``--path`` can repeat the run).

The recording is built in a folder that becomes ``--record DIR`` only when the run ends (see
``common.atomic_files.output_dir``), so a folder never mixes two runs' frames. The PNGs are
encoded and written on a writer thread, off the frame's path (the frame only reads its pixels
back); at most :data:`MAX_PENDING` images wait for it, so a slow disk slows the run rather than
filling the memory.
"""

from __future__ import annotations

import csv
import io
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from autotune_app.report import summary_stats as _stats
from autotune_app.viewer.errors import ViewerError
from autotune_app.viewer.interval import PARTS
from common.atomic_files import OutputError, check_output_dir, write_json, write_text
from common.atomic_files import save_png as _save_png
from raytracer.camera import Camera

INTERVAL_PARTS = tuple(f"{part}_ms" for part in (*PARTS, "other"))
HEAD_FIELDS = ("frame", "wall_s", "target_ms", "render_target_ms", "measured_ms",
               "predicted_ms", "corrected_ms", "probe_ms", "interval_ms", *INTERVAL_PARTS)
# target_ms: between shown frames; render_target_ms: the renderer's share of it; interval_ms:
# from the last frame's present to this one's, in the parts that follow (other: the rest)
MAX_PENDING = 8  # frames whose PNGs may wait for the writer thread
FRAME_COMPRESSION = 1  # zlib level of the recorded frames: encoding competes with rendering
TAIL_FIELDS = ("controller", "tuning", "width", "height", "eye_x", "eye_y", "eye_z", "target_x",
               "target_y", "target_z")


def columns(own: tuple[str, ...]) -> tuple[str, ...]:
    """frames.csv's columns: the viewer's times, a renderer's own columns, the view's state."""
    return HEAD_FIELDS + tuple(own) + TAIL_FIELDS


FIELDS = columns(("primary_ms", "shadow_ms", "ao_ms", "shade_ms", "ao_rays", "ao_radius",
                  "shadows", "phong"))  # the ray tracer's


WARMUP_FRAMES = 1  # the first frame compiles shaders and builds the font atlas: not in the stats


class RecordError(ViewerError):
    """The record directory or one of its files could not be written; the message names it."""


def save_png(image: np.ndarray, path: Path, compress_level: int = 6) -> None:
    """Write an (H, W, 3|4) uint8 image, top row first, as PNG (atomically)."""
    try:
        _save_png(image, path, compress_level)
    except OSError as exc:
        raise RecordError(f"cannot write {path}: {exc.strerror or exc}") from None


def free_name(path: Path) -> Path:
    """``path``, or ``name-2.png``, ``name-3.png``... if it exists (never overwrite a file)."""
    n = 2
    candidate = path
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}-{n}{path.suffix}")
        n += 1
    return candidate


def record_folder(directory: str | Path, force: bool) -> Path:
    """Where ``--record DIR`` goes: DIR if new or empty; with ``force``, a non-empty DIR gets a
    new sub-folder ``DIR/run-N`` (the first free N), so nothing of an earlier run is touched."""
    path = Path(directory)
    try:
        if force and path.is_dir() and any(path.iterdir()):
            n = 1
            while (path / f"run-{n}").exists():
                n += 1
            path = path / f"run-{n}"
        check_output_dir(path)
    except OutputError as exc:
        message = str(exc).replace("pass --force to write into it (same-named files are "
                                   "replaced, nothing else is deleted)",
                                   "pass --force to record into a new sub-folder of it")
        raise RecordError(f"cannot record: {message}") from None
    return path


class Recorder:
    """Writes ``frames/NNNNN.png``, ``frames.csv``, ``camera_path.json`` and ``run.json`` into
    ``directory`` (a fresh folder: the caller moves it into place)."""

    def __init__(self, directory: str | Path, fields: tuple[str, ...] = FIELDS) -> None:
        self.dir, self.fields = Path(directory), fields
        try:
            (self.dir / "frames").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecordError(
                f"cannot write to record directory {self.dir}: {exc.strerror or exc}"
            ) from None
        self.cameras: list[Camera] = []
        self.rows: list[dict] = []
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="record")
        self._pending: deque[Future[None]] = deque()

    def write(self, image: np.ndarray, frame: int) -> None:
        """Hand one frame's image to the writer thread (``frames/NNNNN.png``); waits only
        while :data:`MAX_PENDING` images are queued, and raises a write that failed."""
        while self._pending and (self._pending[0].done() or len(self._pending) >= MAX_PENDING):
            self._pending.popleft().result()
        path = self.dir / "frames" / f"{frame:05d}.png"
        self._pending.append(self._writer.submit(save_png, image, path, FRAME_COMPRESSION))

    def add(self, row: dict, camera: Camera) -> None:
        """Record one frame's figures (keys of ``fields``) and its camera."""
        row = {
            **row,
            "eye_x": camera.eye[0],
            "eye_y": camera.eye[1],
            "eye_z": camera.eye[2],
            "target_x": camera.target[0],
            "target_y": camera.target[1],
            "target_z": camera.target[2],
        }
        self.rows.append(row)
        self.cameras.append(camera)

    def stop(self) -> None:
        """Wait for the images still being written; raise the first write that failed."""
        try:
            while self._pending:
                self._pending.popleft().result()
        finally:
            self._pending.clear()
            self._writer.shutdown(wait=True)

    def close(self, info: dict) -> dict:
        """Finish the files; ``run.json`` holds ``info`` plus per-figure statistics (ms) of the
        frames after the warm-up."""
        self.stop()
        table = io.StringIO()
        writer = csv.DictWriter(table, self.fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.rows)
        try:
            write_text(self.dir / "frames.csv", table.getvalue())
            if self.cameras:
                write_json(self.dir / "camera_path.json",
                           {"cameras": [c.to_dict() for c in self.cameras]}, indent=1)
        except OSError as exc:
            raise RecordError(f"cannot write to {self.dir}: {exc.strerror or exc}") from None
        steady = self.rows[WARMUP_FRAMES:] if len(self.rows) > WARMUP_FRAMES else self.rows
        measured = [r["measured_ms"] for r in steady]
        display = [r["display_ms"] for r in steady]
        summary = {
            **info,
            "frames": len(self.rows),
            "warmup_frames_excluded": len(self.rows) - len(steady),
            "interval_ms": _stats(r["interval_ms"] for r in steady),
            "interval_off_target": _stats(abs(r["interval_ms"] / r["target_ms"] - 1)
                                          for r in steady),
            "interval_parts_median_ms": {
                part: _stats((r[part] for r in steady), ("median",))["median"]
                for part in INTERVAL_PARTS},
            "measured_ms": _stats(measured),
            "display_ms": _stats(display),
            "display_fraction_of_frame": _stats(
                [d / m for d, m in zip(display, measured, strict=True) if m > 0]
            ),
            "display_fraction_of_target": _stats(
                [r["display_ms"] / r["target_ms"] for r in steady]
            ),
            "over_target_frames": sum(r["measured_ms"] > r["target_ms"] for r in self.rows),
        }
        try:
            write_json(self.dir / "run.json", summary, indent=1)
        except OSError as exc:
            raise RecordError(f"cannot write to {self.dir}: {exc.strerror or exc}") from None
        return summary
