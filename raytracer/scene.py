"""Triangle scenes: meshes from OBJ/PLY files, shipped assets by name, procedural test scenes.

A scene is plain arrays (float32 vertices, int32 faces, per-vertex normals) plus its bounds,
a default camera and a point light; everything downstream (BVH, probe, tracer) reads only that.
"""

from __future__ import annotations

import gzip
import io
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from raytracer.camera import Camera


class SceneError(ValueError):
    """A scene could not be loaded; the message names the file or scene and the problem."""


ASSETS_DIR = Path(os.environ.get("AUTOTUNE_ASSETS", Path(__file__).resolve().parents[1] / "assets"))
MESH_SUFFIXES = (".obj", ".ply")


@dataclass
class Scene:
    """Triangle mesh with a default camera and a point light."""

    name: str
    vertices: np.ndarray  # (V, 3) float32
    faces: np.ndarray  # (F, 3) int32
    camera: Camera
    light: np.ndarray  # (3,) float32 point-light position
    normals: np.ndarray = field(default=None)  # (V, 3) float32 per-vertex normals

    def __post_init__(self) -> None:
        if self.normals is None:
            self.normals = vertex_normals(self.vertices, self.faces)

    @property
    def triangle_count(self) -> int:
        return int(len(self.faces))

    @cached_property
    def bounds(self) -> np.ndarray:
        """(2, 3) array: min and max corner (computed once: callers ask every frame)."""
        return np.stack([self.vertices.min(axis=0), self.vertices.max(axis=0)])

    @property
    def diagonal(self) -> float:
        lo, hi = self.bounds
        return float(np.linalg.norm(hi - lo))

    @property
    def center(self) -> np.ndarray:
        return self.bounds.mean(axis=0)

    def triangles(self) -> np.ndarray:
        """(F, 3, 3) float32 corner positions."""
        return self.vertices[self.faces]


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted per-vertex normals (smooth Phong shading of scanned meshes)."""
    tri = vertices[faces].astype(np.float64)
    face_n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normals = np.zeros(vertices.shape, np.float64)
    for k in range(3):
        np.add.at(normals, faces[:, k], face_n)
    length = np.linalg.norm(normals, axis=1, keepdims=True)
    normals = np.divide(normals, length, out=np.zeros_like(normals), where=length > 0)
    return normals.astype(np.float32)


def clean_mesh(vertices: np.ndarray, faces: np.ndarray,
               source: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate a raw mesh; drop degenerate triangles with a warning; raise SceneError otherwise."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) == 0:
        raise SceneError(f"{source}: mesh has no vertices")
    if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
        raise SceneError(f"{source}: mesh has no triangles")
    if not np.isfinite(vertices).all():
        bad = int((~np.isfinite(vertices).all(axis=1)).sum())
        raise SceneError(f"{source}: {bad} vertices have NaN or infinite coordinates")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise SceneError(f"{source}: a face refers to a vertex index outside "
                         f"0..{len(vertices) - 1}")
    tri = vertices[faces]
    area2 = np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    scale = float(np.abs(vertices).max()) or 1.0
    degenerate = area2 <= (scale * 1e-7) ** 2
    if degenerate.all():
        raise SceneError(f"{source}: all {len(faces)} triangles are degenerate (zero area)")
    if degenerate.any():
        warnings.warn(f"{source}: dropped {int(degenerate.sum())} degenerate triangles "
                      f"of {len(faces)}", stacklevel=3)
        faces = faces[~degenerate]
    return vertices.astype(np.float32), faces.astype(np.int32)


def load_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read an OBJ or PLY (ASCII or binary, optionally ``.gz``) with trimesh; validate it."""
    import trimesh  # deferred: ~0.3 s import, only needed for files

    path = Path(path)
    suffixes = [s.lower() for s in path.suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    kind = (suffixes[-2] if gz and len(suffixes) > 1 else suffixes[-1] if suffixes else "")
    if kind not in MESH_SUFFIXES:
        raise SceneError(f"{path}: unsupported mesh format {kind or '(none)'!r}; "
                         f"use .obj or .ply, optionally gzipped")
    try:
        data = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    except FileNotFoundError:
        raise SceneError(f"{path}: file not found") from None
    except (OSError, EOFError) as exc:
        raise SceneError(f"{path}: cannot read ({exc})") from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mesh = trimesh.load(io.BytesIO(data), file_type=kind[1:], force="mesh", process=False)
    except Exception as exc:  # trimesh raises many kinds for malformed input
        raise SceneError(f"{path}: malformed {kind[1:].upper()} file ({exc})") from None
    vertices = np.asarray(getattr(mesh, "vertices", np.empty((0, 3))))
    faces = np.asarray(getattr(mesh, "faces", np.empty((0, 3))))
    return clean_mesh(vertices, faces, str(path))


def _default_camera(vertices: np.ndarray) -> Camera:
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    center = (lo + hi) / 2
    diag = float(np.linalg.norm(hi - lo))
    eye = center + np.array([0.25, 0.2, 1.0]) * diag * 0.8
    return Camera(tuple(map(float, eye)), tuple(map(float, center)))


def _default_light(vertices: np.ndarray) -> np.ndarray:
    lo, hi = vertices.min(axis=0), vertices.max(axis=0)
    diag = float(np.linalg.norm(hi - lo))
    return ((lo + hi) / 2 + np.array([0.6, 1.0, 0.8]) * diag).astype(np.float32)


def scene_from_mesh(name: str, vertices: np.ndarray, faces: np.ndarray,
                    camera: Camera | None = None, light: np.ndarray | None = None) -> Scene:
    """Wrap validated arrays in a Scene with a default camera and light where none is given."""
    return Scene(name, vertices, faces, camera or _default_camera(vertices),
                 np.asarray(light if light is not None else _default_light(vertices), np.float32))


def _asset(name: str) -> tuple[np.ndarray, np.ndarray]:
    path = ASSETS_DIR / f"{name}.npz"
    try:
        with np.load(path) as data:
            return clean_mesh(data["vertices"], data["faces"], str(path))
    except (OSError, KeyError, ValueError) as exc:
        if isinstance(exc, SceneError):
            raise
        raise SceneError(f"shipped asset {path} is missing or corrupt ({exc})") from None


def _ground(size: float, y: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[-size, y, -size], [size, y, -size], [size, y, size], [-size, y, size]])
    return v, np.array([[0, 2, 1], [0, 3, 2]])


def _merge(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    verts, faces, offset = [], [], 0
    for v, f in parts:
        verts.append(np.asarray(v, np.float64))
        faces.append(np.asarray(f) + offset)
        offset += len(v)
    return np.concatenate(verts).astype(np.float32), np.concatenate(faces).astype(np.int32)


def _spheres_scene() -> Scene:
    import trimesh

    parts = [_ground(6.0)]
    for x, z, r in [(-2.0, 0.0, 1.0), (0.5, -1.0, 1.4), (2.6, 1.2, 0.8), (0.0, 2.2, 0.6)]:
        s = trimesh.creation.icosphere(subdivisions=4, radius=r)
        parts.append((s.vertices + [x, r, z], s.faces))
    v, f = _merge(parts)
    cam = Camera((0.0, 4.0, 9.0), (0.0, 0.8, 0.0))
    return Scene("spheres", v, f, cam, np.array([4.0, 8.0, 5.0], np.float32))


def _city_scene(blocks: int = 48, seed: int = 7) -> Scene:
    """A dense grid of boxes of random heights: the heavy, occlusion-rich view."""
    rng = np.random.default_rng(seed)
    unit = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0],
                     [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], np.float64)
    box_faces = np.array([[0, 2, 1], [0, 3, 2], [4, 5, 6], [4, 6, 7], [0, 1, 5], [0, 5, 4],
                          [3, 6, 2], [3, 7, 6], [0, 4, 7], [0, 7, 3], [1, 2, 6], [1, 6, 5]])
    parts = [_ground(blocks * 0.6, 0.0)]
    for i in range(blocks):
        for j in range(blocks):
            h = rng.gamma(2.0, 1.0) + 0.2
            w = rng.uniform(0.5, 0.9)
            corner = np.array([i - blocks / 2, 0.0, j - blocks / 2])
            parts.append((corner + unit * [w, h, w], box_faces))
    v, f = _merge(parts)
    cam = Camera((-blocks * 0.45, blocks * 0.22, -blocks * 0.45), (0.0, 0.0, 0.0))
    light = np.array([blocks * 0.3, blocks * 0.8, blocks * 0.1], np.float32)
    return Scene("city", v, f, cam, light)


def _sibenik_scene() -> Scene:
    v, f = _asset("sibenik")
    cam = Camera((-16.5, -11.0, 0.0), (0.0, -9.0, 0.0), fov_y=60.0)
    return Scene("sibenik", v, f, cam, np.array([0.0, 5.0, 0.0], np.float32))


def _asset_scene(name: str) -> Callable[[], Scene]:
    return lambda: scene_from_mesh(name, *_asset(name))


SCENES: dict[str, Callable[[], Scene]] = {
    "bunny": _asset_scene("bunny"),
    "dragon": _asset_scene("dragon"),
    "dragon-small": _asset_scene("dragon-small"),
    "sibenik": _sibenik_scene,
    "spheres": _spheres_scene,
    "city": _city_scene,
}


def load_scene(name_or_path: str | Path) -> Scene:
    """A shipped or procedural scene by name, or a mesh file by path."""
    key = str(name_or_path)
    if key in SCENES:
        return SCENES[key]()
    path = Path(key)
    if path.suffix.lower() in (*MESH_SUFFIXES, ".gz") or path.exists():
        return scene_from_mesh(path.name, *load_mesh(path))
    raise SceneError(f"unknown scene {key!r}; known scenes: {', '.join(SCENES)}, "
                     f"or a path to an .obj/.ply file")
