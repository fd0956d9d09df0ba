"""Pinhole cameras and the camera paths (orbit + dolly, abrupt turn) that benchmarks replay."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Camera:
    """A pinhole camera looking from ``eye`` at ``target`` with vertical field of view ``fov_y``."""

    eye: tuple[float, float, float]
    target: tuple[float, float, float]
    up: tuple[float, float, float] = (0.0, 1.0, 0.0)
    fov_y: float = 45.0

    def basis(self, width: int, height: int) -> np.ndarray:
        """Return ``[eye, lower_left_dir, du, dv]`` (4x3 float32): the ray through pixel
        (x, y) has direction ``lower_left_dir + (x + 0.5) * du + (y + 0.5) * dv`` (y down).
        Plain floats, not small arrays: the volume probe asks for one every frame (30 -> 2 µs)."""
        ex, ey, ez = map(float, self.eye)
        fx, fy, fz = (float(self.target[0]) - ex, float(self.target[1]) - ey,
                      float(self.target[2]) - ez)
        norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        if not math.isfinite(norm) or norm == 0.0:
            raise ValueError(f"camera eye {self.eye} and target {self.target} must differ")
        fx, fy, fz = fx / norm, fy / norm, fz / norm
        rx, ry, rz = _cross((fx, fy, fz), tuple(map(float, self.up)))
        rn = math.sqrt(rx * rx + ry * ry + rz * rz)
        if rn < 1e-9:
            rx, ry, rz = _cross((fx, fy, fz), (0.0, 0.0, 1.0))
            rn = math.sqrt(rx * rx + ry * ry + rz * rz)
        rx, ry, rz = rx / rn, ry / rn, rz / rn
        ux, uy, uz = _cross((rx, ry, rz), (fx, fy, fz))
        half_h = math.tan(math.radians(self.fov_y) / 2.0)
        half_w = half_h * width / height
        su, sv = 2.0 * half_w / width, 2.0 * half_h / height
        return np.array([[ex, ey, ez],
                         [fx - rx * half_w + ux * half_h, fy - ry * half_w + uy * half_h,
                          fz - rz * half_w + uz * half_h],
                         [rx * su, ry * su, rz * su],
                         [-ux * sv, -uy * sv, -uz * sv]], dtype=np.float32)

    def to_dict(self) -> dict:
        return {"eye": list(self.eye), "target": list(self.target), "up": list(self.up),
                "fov_y": self.fov_y}

    @staticmethod
    def from_dict(d: dict) -> Camera:
        return Camera(tuple(map(float, d["eye"])), tuple(map(float, d["target"])),
                      tuple(map(float, d.get("up", (0.0, 1.0, 0.0)))), float(d.get("fov_y", 45.0)))


def _cross(a: tuple[float, float, float], b: tuple[float, float, float]
           ) -> tuple[float, float, float]:
    """The cross product of two 3-vectors of plain floats."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def orbit_path(center: np.ndarray, start_eye: np.ndarray, frames: int, turns: float = 0.5,
               dolly: float = 0.5, up=(0.0, 1.0, 0.0), fov_y: float = 45.0) -> list[Camera]:
    """The paper's animation: orbit ``center`` while moving in to ``dolly`` of the distance."""
    center = np.asarray(center, np.float64)
    offset = np.asarray(start_eye, np.float64) - center
    radius0 = math.hypot(offset[0], offset[2])
    angle0 = math.atan2(offset[2], offset[0])
    cams = []
    for i in range(frames):
        s = i / max(frames - 1, 1)
        radius = radius0 * (1.0 - (1.0 - dolly) * s)
        angle = angle0 + 2.0 * math.pi * turns * s
        height = offset[1] * (1.0 - (1.0 - dolly) * s)
        eye = center + np.array([radius * math.cos(angle), height, radius * math.sin(angle)])
        cams.append(Camera(tuple(eye), tuple(center), up, fov_y))
    return cams


def turn_path(eye: np.ndarray, away: np.ndarray, toward: np.ndarray, frames: int,
              turn_at: int, up=(0.0, 1.0, 0.0), fov_y: float = 45.0) -> list[Camera]:
    """Look at ``away`` (an empty view); at frame ``turn_at`` snap to ``toward`` (dense)."""
    eye_t = tuple(map(float, eye))
    return [Camera(eye_t, tuple(map(float, away if i < turn_at else toward)), up, fov_y)
            for i in range(frames)]


def with_next(cameras: Sequence[Camera]) -> Iterator[tuple[Camera, Camera | None]]:
    """Each camera of a path with the one after it (None after the last): the view a governed
    renderer may probe ahead while it renders this one."""
    return zip(cameras, [*cameras[1:], None][:len(cameras)], strict=True)


def save_path(cameras: list[Camera], path: str | Path) -> None:
    """Write a camera path as JSON (``{"cameras": [...]}``), atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"cameras": [c.to_dict() for c in cameras]}, indent=1))
    tmp.replace(path)


def load_path(path: str | Path) -> list[Camera]:
    """Read a camera path written by :func:`save_path`; errors name the file and the problem."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        cams = [Camera.from_dict(d) for d in data["cameras"]]
    except FileNotFoundError:
        raise ValueError(f"camera path {path}: file not found") from None
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"camera path {path}: not a valid camera path file ({exc})") from None
    if not cams:
        raise ValueError(f"camera path {path}: contains no cameras")
    for i, c in enumerate(cams):
        if not all(math.isfinite(v) for v in (*c.eye, *c.target, *c.up, c.fov_y)):
            raise ValueError(f"camera path {path}: camera {i} has a non-finite value")
    return cams
