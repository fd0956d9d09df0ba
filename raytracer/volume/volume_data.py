"""Scalar volumes: the ``Volume`` type and ``load_volume`` (files, shipped names, procedural).

A volume is a float32 array indexed [z, y, x] (x fastest, as on disk), voxel spacing (x, y, z)
and its value range. World coordinates: voxel (i, j, k) sits at ``origin + (i, j, k) * spacing``
with the box centred on the world origin, so cameras can orbit (0, 0, 0) for any volume.
Every problem raises one :class:`VolumeError` naming the file or value, before any rendering.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from raytracer.volume.errors import VolumeError
from raytracer.volume.volume_formats import (
    COMPRESSED,
    parse_raw_name,
    read_nifti,
    read_npy,
    read_nrrd,
    read_raw,
    read_vtk_image,
)

ASSETS_DIR = Path(os.environ.get("AUTOTUNE_ASSETS",
                                 Path(__file__).resolve().parents[2] / "assets"))
VOLUMES_DIR = ASSETS_DIR / "volumes"
PROCEDURAL = {"marschner-lobb": 41, "field": 512}  # name -> default size (name:N overrides)
MAX_PROCEDURAL = 2048


@dataclass(frozen=True)
class Volume:
    """A scalar volume: float32 ``data[z, y, x]``, ``spacing`` (x, y, z), name and source."""

    data: np.ndarray
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    name: str = "volume"
    source: str = ""
    value_range: tuple[float, float] = field(default=(0.0, 0.0))

    def __post_init__(self) -> None:
        data = np.ascontiguousarray(self.data, dtype=np.float32)
        object.__setattr__(self, "data", data)
        where = self.source or self.name
        if data.ndim != 3:
            raise VolumeError(f"{where}: a volume needs 3 dimensions, got shape {data.shape}")
        if min(data.shape) < 2:
            raise VolumeError(f"{where}: empty volume (dims {self.dims}; every axis needs at "
                              f"least 2 voxels)")
        spacing = tuple(float(s) for s in self.spacing)
        if len(spacing) != 3 or not all(np.isfinite(s) and s > 0 for s in spacing):
            raise VolumeError(f"{where}: spacing must be 3 positive numbers, got {self.spacing}")
        object.__setattr__(self, "spacing", spacing)
        finite = np.isfinite(data)
        if not finite.all():
            bad = np.argwhere(~finite)[0]
            raise VolumeError(f"{where}: {int((~finite).sum())} NaN/inf voxels (first at "
                              f"x={bad[2]}, y={bad[1]}, z={bad[0]}: {data[tuple(bad)]})")
        lo, hi = float(data.min()), float(data.max())
        if lo == hi:
            raise VolumeError(f"{where}: constant volume (every voxel is {lo}); nothing to render")
        object.__setattr__(self, "value_range", (lo, hi))

    @property
    def dims(self) -> tuple[int, int, int]:
        """Voxel counts (x, y, z)."""
        nz, ny, nx = self.data.shape
        return nx, ny, nz

    @property
    def extent(self) -> np.ndarray:
        """World size of the box spanned by the voxel centres, (x, y, z)."""
        return (np.asarray(self.dims, np.float64) - 1.0) * np.asarray(self.spacing)

    @property
    def origin(self) -> np.ndarray:
        """World position of voxel (0, 0, 0): the box is centred on the world origin."""
        return -0.5 * self.extent

    @property
    def radius(self) -> float:
        """Half the box diagonal: a camera at 2-3 radii sees the whole volume."""
        return float(0.5 * np.linalg.norm(self.extent))

    @cached_property
    def normalized(self) -> np.ndarray:
        """Values mapped to [0, 1] by the global value range (the transfer function's domain);
        every brick slices this one array, so neighbouring bricks agree voxel for voxel."""
        lo, hi = self.value_range
        if (lo, hi) == (0.0, 1.0):  # already normalized (the generated field): no copy
            return self.data
        return ((self.data - np.float32(lo)) * self.value_scale).astype(np.float32)

    @property
    def value_scale(self) -> np.float32:
        """The float32 factor ``normalized`` applies to ``data - min``: 1 / (max - min)."""
        lo, hi = self.value_range
        return np.float32(1.0 / (hi - lo))

    @cached_property
    def byte_levels(self) -> np.ndarray | None:
        """uint8 ``data - min`` where every voxel is a whole number 0..255 above the minimum
        (8-bit scans), else None. ``levels * value_scale`` in float32 is ``normalized`` bit for
        bit (``data - min`` is exact for such data), so a renderer may keep bytes and normalise
        as it reads."""
        lo, hi = self.value_range
        if hi - lo > 255:
            return None
        offset = self.data - np.float32(lo)
        levels = offset.astype(np.uint8)  # truncates: equal to offset only where it is whole
        return levels if np.array_equal(levels, offset) else None


def _index() -> dict:
    path = VOLUMES_DIR / "volumes.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise VolumeError(f"{path}: shipped volume index unreadable ({exc})") from None


def shipped_volumes() -> dict[str, tuple[int, int, int]]:
    """Shipped volume names -> dims (x, y, z), without reading the voxels."""
    return {name: tuple(entry["dims"]) for name, entry in _index().items()}


def known_names() -> list[str]:
    """Every name ``load_volume`` accepts besides file paths."""
    return [*shipped_volumes(), "marschner-lobb[:N]", "field[:N]"]


def _procedural(name: str) -> Volume | None:
    base, _, size = name.partition(":")
    if base not in PROCEDURAL:
        return None
    try:
        n = int(size) if size else PROCEDURAL[base]
    except ValueError:
        raise VolumeError(f"volume {name!r}: size {size!r} is not an integer") from None
    if not 2 <= n <= MAX_PROCEDURAL:
        raise VolumeError(f"volume {name!r}: size must be in 2..{MAX_PROCEDURAL}, got {n}")
    from raytracer.volume import procedural  # lazy: numba; imported only when a field is made

    if base == "marschner-lobb":
        return Volume(procedural.marschner_lobb(n), name=f"marschner-lobb:{n}",
                      source="analytic Marschner-Lobb (f_M=6, alpha=0.25)")
    return Volume(procedural.large_field(n), name=f"field:{n}",
                  source=f"generated blob field (seed {procedural.FIELD_SEED})")


def _shipped(name: str, spacing) -> Volume:
    entry = _index()[name]
    path = VOLUMES_DIR / entry["file"]
    data = read_raw(path, tuple(entry["dims"]), entry["dtype"])
    return Volume(data, tuple(spacing or entry["spacing"]), name, entry.get("source", str(path)))


#: Volume file suffixes :func:`load_volume` reads (.vti/.vtk where VTK is installed)
FILE_FORMATS = (".raw", ".nrrd", ".nhdr", ".nii", ".nii.gz", ".npy", ".vti", ".vtk")


def _suffix(path: Path) -> str:
    """Lower-case format suffix, looking through a compression suffix (.raw.gz -> .raw)."""
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] in COMPRESSED:
        return suffixes[-2] + suffixes[-1] if suffixes[-2] == ".nii" else suffixes[-2]
    return suffixes[-1] if suffixes else ""


def load_volume(name_or_path: str | Path, dims: tuple[int, int, int] | None = None,
                dtype: str | None = None,
                spacing: tuple[float, float, float] | None = None) -> Volume:
    """A volume by shipped name (bonsai, ...), procedural name (``marschner-lobb:64``,
    ``field:512``) or file (.raw[.gz|.xz|.bz2], .nrrd/.nhdr, .nii[.gz], .npy, or VTK image
    data .vti/.vtk where VTK is installed).

    ``dims`` (x, y, z) and ``dtype`` are for raw files whose name does not carry them;
    ``spacing`` (x, y, z) overrides the file's header (default 1)."""
    text = str(name_or_path)
    if text.lower() in (names := _index()):
        return _shipped(text.lower(), spacing)
    vol = _procedural(text.lower())
    if vol is not None:
        return vol if spacing is None else Volume(vol.data, spacing, vol.name, vol.source)
    path = Path(text).expanduser()
    kind = _suffix(path)
    if not path.exists():
        if kind in FILE_FORMATS or os.sep in text:
            raise VolumeError(f"{path}: file not found")
        raise VolumeError(f"unknown volume {text!r}; known names: "
                          f"{', '.join([*names, 'marschner-lobb[:N]', 'field[:N]'])}, "
                          f"or a {'/'.join(FILE_FORMATS)} file")
    header_spacing = None
    if kind == ".raw":
        data = read_raw(path, dims, dtype)
    elif kind in (".nrrd", ".nhdr"):
        data, header_spacing = read_nrrd(path)
    elif kind in (".nii", ".nii.gz"):
        data, header_spacing = read_nifti(path)
    elif kind == ".npy":
        data = read_npy(path)
    elif kind in (".vti", ".vtk"):
        data, header_spacing = read_vtk_image(path)
    else:
        raise VolumeError(f"{path}: unknown volume format {kind or '(no suffix)'!r}; use "
                          f"{', '.join(FILE_FORMATS[:-1])} or {FILE_FORMATS[-1]}")
    parsed = parse_raw_name(path)
    name = parsed[0] if parsed else path.name.split(".")[0]
    return Volume(data, tuple(spacing or header_spacing or (1.0, 1.0, 1.0)), name, str(path))
