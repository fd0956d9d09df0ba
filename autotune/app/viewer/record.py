"""Recording a viewer run: frame PNGs, a CSV row of figures per frame, a JSON summary, the camera
path (so ``--path`` can repeat the run)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
from PIL import Image

from autotune.app.viewer import ViewerError
from raytracer.camera import Camera, save_path

FIELDS = (
    "frame",
    "wall_s",
    "target_ms",
    "measured_ms",
    "predicted_ms",
    "corrected_ms",
    "display_ms",
    "probe_ms",
    "primary_ms",
    "shadow_ms",
    "ao_ms",
    "shade_ms",
    "ao_rays",
    "ao_radius",
    "shadows",
    "phong",
    "controller",
    "tuning",
    "width",
    "height",
    "eye_x",
    "eye_y",
    "eye_z",
    "target_x",
    "target_y",
    "target_z",
)


WARMUP_FRAMES = 1  # the first frame compiles shaders and builds the font atlas: not in the stats


class RecordError(ViewerError):
    """The record directory or one of its files could not be written; the message names it."""


def save_png(image: np.ndarray, path: Path) -> None:
    """Write an (H, W, 3|4) uint8 image, top row first, as a fast-compressed PNG."""
    try:
        Image.fromarray(np.ascontiguousarray(image)).save(path, compress_level=1)
    except OSError as exc:
        raise RecordError(f"cannot write {path}: {exc.strerror or exc}") from None


def _stats(values: list[float]) -> dict[str, float]:
    """Mean, median, 95th percentile and max of a list (NaN when empty)."""
    if not values:
        return {"mean": math.nan, "median": math.nan, "p95": math.nan, "max": math.nan}
    a = np.asarray(values, np.float64)
    return {
        "mean": float(a.mean()),
        "median": float(np.median(a)),
        "p95": float(np.percentile(a, 95)),
        "max": float(a.max()),
    }


class Recorder:
    """Writes ``frames/NNNNN.png``, ``frames.csv``, ``camera_path.json`` and ``run.json``."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        try:
            (self.dir / "frames").mkdir(parents=True, exist_ok=True)
            self._csv_file = open(self.dir / "frames.csv", "w", newline="")  # noqa: SIM115
        except OSError as exc:
            raise RecordError(
                f"cannot write to record directory {self.dir}: {exc.strerror or exc}"
            ) from None
        self._csv = csv.DictWriter(self._csv_file, FIELDS)
        self._csv.writeheader()
        self.cameras: list[Camera] = []
        self.rows: list[dict] = []

    def add(self, row: dict, camera: Camera, image: np.ndarray) -> None:
        """Record one frame's figures (keys of :data:`FIELDS`), its camera and its image."""
        row = {
            **row,
            "eye_x": camera.eye[0],
            "eye_y": camera.eye[1],
            "eye_z": camera.eye[2],
            "target_x": camera.target[0],
            "target_y": camera.target[1],
            "target_z": camera.target[2],
        }
        self._csv.writerow(row)
        self.rows.append(row)
        self.cameras.append(camera)
        save_png(image, self.dir / "frames" / f"{int(row['frame']):05d}.png")

    def close(self, info: dict) -> dict:
        """Finish the files; ``run.json`` holds ``info`` plus per-figure statistics (ms) of the
        frames after the warm-up."""
        self._csv_file.close()
        if self.cameras:
            save_path(self.cameras, self.dir / "camera_path.json")
        steady = self.rows[WARMUP_FRAMES:] if len(self.rows) > WARMUP_FRAMES else self.rows
        measured = [r["measured_ms"] for r in steady]
        display = [r["display_ms"] for r in steady]
        summary = {
            **info,
            "frames": len(self.rows),
            "warmup_frames_excluded": len(self.rows) - len(steady),
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
        (self.dir / "run.json").write_text(json.dumps(summary, indent=1))
        return summary
