"""Triangle scenes: meshes from OBJ/PLY files, shipped assets by name, procedural test scenes.

A scene is plain arrays (float32 vertices, int32 faces, per-vertex normals) plus its bounds,
a default camera and a point light; everything downstream (BVH, probe, tracer) reads only that.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from raytracer.camera import Camera
from raytracer.volume.volume_data import load_volume


class SceneError(ValueError):
    """A scene could not be loaded; the message names the file or scene and the problem."""


class SceneWarning(UserWarning):
    """A mesh loaded, but part of it was dropped; the message names the file and what."""


ASSETS_DIR = Path(os.environ.get("AUTOTUNE_ASSETS", Path(__file__).resolve().parents[2] / "assets"))
MESH_SUFFIXES = (".obj", ".ply")
DEFAULT_SCENE = "dragon"  # every command's default
# --up: which axis of the mesh points up -> the rotation (det +1) taking it to +y
UP_AXES: dict[str, np.ndarray] = {
    "y": np.eye(3),
    "-y": np.diag([1.0, -1.0, -1.0]),
    "z": np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]]),
    "-z": np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]]),
    "x": np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]]),
    "-x": np.array([[0.0, 1, 0], [-1, 0, 0], [0, 0, 1]]),
}


@dataclass
class Scene:
    """Triangle mesh with a default camera and a point light."""

    name: str
    vertices: np.ndarray  # (V, 3) float32
    faces: np.ndarray  # (F, 3) int32
    camera: Camera
    light: np.ndarray  # (3,) float32 point-light position
    normals: np.ndarray = field(default=None)  # (V, 3) float32 per-vertex normals
    # how the scene was loaded (seconds, mesh cache use), for a command to report
    load_info: dict = field(default_factory=dict)

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

    @cached_property
    def diagonal(self) -> float:
        """Length of the bounds' diagonal (computed once: the governed loop asks every
        frame)."""
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
    vertices, faces, dropped = _clean_mesh(vertices, faces, source)
    if dropped:
        warn_degenerate(source, dropped, len(faces) + dropped)
    return vertices, faces


def _clean_mesh(vertices: np.ndarray, faces: np.ndarray,
                source: str) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`clean_mesh` without the warning: also returns how many triangles were dropped."""
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
    faces = faces[~degenerate]
    return vertices.astype(np.float32), faces.astype(np.int32), int(degenerate.sum())


def warn_degenerate(source: str, dropped: int, total: int) -> None:
    """The one warning for dropped zero-area triangles (a command prints it as one line)."""
    warnings.warn(f"{source}: dropped {dropped} degenerate triangles of {total} (zero area)",
                  SceneWarning, stacklevel=2)


def mesh_kind(path: Path) -> tuple[str, bool]:
    """``(".obj" | ".ply", gzipped)`` from the file name; SceneError for anything else."""
    suffixes = [s.lower() for s in path.suffixes]
    gz = bool(suffixes) and suffixes[-1] == ".gz"
    kind = (suffixes[-2] if gz and len(suffixes) > 1 else suffixes[-1] if suffixes else "")
    if kind not in MESH_SUFFIXES:
        raise SceneError(f"{path}: unsupported mesh format {kind or '(none)'!r}; "
                         f"use .obj or .ply, optionally gzipped")
    return kind, gz


def mesh_file_stat(path: Path) -> os.stat_result:
    """The file's stat; SceneError unless it is a regular file (a FIFO would block a read)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise SceneError(f"{path}: file not found") from None
    except OSError as exc:
        raise SceneError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise SceneError(f"{path}: is a folder, not a mesh file")
    if not stat.S_ISREG(st.st_mode):
        raise SceneError(f"{path}: not a regular file (a pipe, socket or device); "
                         f"give a mesh file")
    return st


def _decode_text(data: bytes) -> str:
    """Mesh text as UTF-8, else Latin-1 (which decodes any byte: a stray accent in a comment
    must not fail the file)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _check_ascii_ply(data: bytes, path: Path) -> None:
    """An ASCII PLY's header counts must match its body: one line per element, in order."""
    end = data.find(b"end_header")
    if not data.startswith(b"ply") or end < 0:
        return  # trimesh reports a broken header
    header = _decode_text(data[:end]).splitlines()
    if not any(line.split()[:2] == ["format", "ascii"] for line in header):
        return
    elements = [(parts[1], int(parts[2])) for parts in (line.split() for line in header)
                if len(parts) == 3 and parts[0] == "element" and parts[2].isdigit()]
    declared = sum(n for _, n in elements)
    newline = data.find(b"\n", end)
    body = data[newline + 1:] if newline >= 0 else b""
    lines = sum(1 for line in body.splitlines() if line.strip())
    counts = ", ".join(f"{name} {n}" for name, n in elements)
    if lines < declared:
        raise SceneError(f"{path}: truncated ASCII PLY: the header declares {counts} "
                         f"({declared} lines) but the file has only {lines} data lines")
    if lines > declared:
        raise SceneError(f"{path}: ASCII PLY has {lines} data lines but its header declares "
                         f"only {counts} ({declared} lines); fix the element counts")


def _count_obj_vertices(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith("v "))


def load_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read an OBJ or PLY (ASCII or binary, optionally ``.gz``) with trimesh; validate it."""
    vertices, faces, _ = read_mesh(path)
    return vertices, faces


def read_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Like :func:`load_mesh`, also returning how many degenerate triangles were dropped (a
    cache of converted meshes repeats the warning from it)."""
    import trimesh  # lazy: ~0.3 s import, only needed for files

    path = Path(path)
    kind, gz = mesh_kind(path)
    mesh_file_stat(path)
    try:
        data = gzip.decompress(path.read_bytes()) if gz else path.read_bytes()
    except (OSError, EOFError) as exc:
        raise SceneError(f"{path}: cannot read ({exc})") from None
    text = None
    if kind == ".obj":
        text = _decode_text(data)
        source = io.StringIO(text)  # trimesh's own decoding needs charset_normalizer
    else:
        _check_ascii_ply(data, path)
        source = io.BytesIO(data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mesh = trimesh.load(source, file_type=kind[1:], force="mesh", process=False)
    except ImportError as exc:  # a missing package is not the file's fault
        raise SceneError(f"{path}: cannot be read: the Python package {exc.name!r} is "
                         f"missing (pip install {exc.name})") from None
    except Exception as exc:  # trimesh raises many kinds for malformed input
        raise SceneError(f"{path}: malformed {kind[1:].upper()} file ({exc})") from None
    vertices = np.asarray(getattr(mesh, "vertices", np.empty((0, 3))))
    faces = np.asarray(getattr(mesh, "faces", np.empty((0, 3))))
    if len(faces) == 0:
        n = _count_obj_vertices(text) if text is not None else len(vertices)
        if n:
            raise SceneError(f"{path}: has {n} vertices but no faces; only triangle meshes "
                             f"can be rendered")
    vertices, faces, dropped = _clean_mesh(vertices, faces, str(path))
    if dropped:
        warn_degenerate(str(path), dropped, len(faces) + dropped)
    return vertices, faces, dropped


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
    import trimesh  # lazy: ~0.3 s import, only needed for this scene

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


def _grass_scene(side: int = 56, segments: int = 4, seed: int = 11) -> Scene:
    """A jittered field of thin, tall, bent blades on a ground plane: many sliver triangles
    that partly hide each other, so shadow and AO rays scatter between them."""
    rng = np.random.default_rng(seed)
    n = side * side
    base = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1)
    base = (base.reshape(n, 2) - side / 2 + rng.uniform(0.0, 1.0, (n, 2))) * 0.25
    height = rng.uniform(0.8, 2.0, n)
    width = rng.uniform(0.02, 0.05, n)
    facing = rng.uniform(0.0, np.pi, n)
    lean = rng.uniform(-0.35, 0.35, (n, 2))
    t = np.linspace(0.0, 1.0, segments + 1)  # along the blade, base to tip
    across = np.stack([np.cos(facing), np.zeros(n), np.sin(facing)], -1)  # (n, 3)
    spine = np.zeros((n, segments + 1, 3))
    spine[..., 0] = base[:, None, 0] + lean[:, None, 0] * height[:, None] * t**2
    spine[..., 1] = height[:, None] * t
    spine[..., 2] = base[:, None, 1] + lean[:, None, 1] * height[:, None] * t**2
    half = (width[:, None] * (1.0 - 0.9 * t))[..., None] * across[:, None, :]
    verts = np.stack([spine - half, spine + half], axis=2).reshape(n, 2 * (segments + 1), 3)
    k = 2 * np.arange(segments)[:, None]
    quad = np.concatenate([k + [0, 1, 3], k + [0, 3, 2]])  # two triangles per segment
    faces = quad[None] + (2 * (segments + 1) * np.arange(n))[:, None, None]
    v, f = _merge([_ground(side * 0.2), (verts.reshape(-1, 3), faces.reshape(-1, 3))])
    cam = Camera((side * 0.11, 2.4, side * 0.13), (0.0, 0.5, 0.0), fov_y=50.0)
    return Scene("grass", v, f, cam, np.array([-side * 0.1, 12.0, side * 0.05], np.float32))


def _terrain_scene(size: int = 128, seed: int = 5) -> Scene:
    """A heightfield of summed random waves (ridges and valleys) seen from low over it: one
    continuous surface that shadows itself, seen mostly at grazing angles."""
    rng = np.random.default_rng(seed)
    x, z = np.meshgrid(np.linspace(-1.0, 1.0, size), np.linspace(-1.0, 1.0, size),
                       indexing="ij")
    y = np.zeros_like(x)
    for octave in range(6):
        freq, amp = 2.0 ** octave * 1.5, 0.5 ** octave
        for _ in range(3):
            angle, phase = rng.uniform(0.0, 2 * np.pi, 2)
            y += amp / 3 * np.sin(freq * np.pi * (np.cos(angle) * x + np.sin(angle) * z)
                                  + phase)
    y = 0.3 * np.abs(y) ** 1.3  # sharp ridges
    v = np.stack([x * 8.0, y * 8.0, z * 8.0], -1).reshape(-1, 3)
    idx = np.arange(size * size).reshape(size, size)
    a, b = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel()
    c, d = idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    f = np.concatenate([np.stack([a, c, b], -1), np.stack([a, d, c], -1)])
    v, f = _merge([(v, f)])
    cam = Camera((-7.5, 5.5, -6.5), (0.5, 0.5, 0.5), fov_y=50.0)
    return Scene("terrain", v, f, cam, np.array([6.0, 9.0, -4.0], np.float32))


def _voxel_surface(occupied: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The faces between occupied and empty voxels, two triangles each, wound outward; the
    vertices are the voxel corners they use (integer grid coordinates, axes as given)."""
    occupied = np.pad(occupied, 1).astype(np.int8)
    shape = np.array(occupied.shape) + 1
    faces, outward = [], []
    for axis in range(3):
        rest = [a for a in range(3) if a != axis]
        change = np.diff(occupied, axis=axis)  # +1: full on the far side, so facing -axis
        cells = np.nonzero(change)
        corners = []
        for du, dv in ((0, 0), (1, 0), (1, 1), (0, 1)):
            p = np.stack(cells, 1)
            p[:, axis] += 1
            p[:, rest[0]] += du
            p[:, rest[1]] += dv
            corners.append(np.ravel_multi_index(p.T, shape))
        quad = np.stack(corners, 1)
        faces.append(np.concatenate([quad[:, [0, 1, 2]], quad[:, [0, 2, 3]]]))
        normal = np.zeros((len(quad), 3))
        normal[:, axis] = -change[cells]
        outward += [normal, normal]
    used, inverse = np.unique(np.concatenate(faces), return_inverse=True)
    vertices = np.stack(np.unravel_index(used, shape), 1).astype(np.float64)
    f = inverse.reshape(-1, 3)
    tri = vertices[f]
    wound = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    flip = (wound * np.concatenate(outward)).sum(axis=1) < 0
    f[flip] = f[flip][:, ::-1]
    return vertices, f


def _smooth(vertices: np.ndarray, faces: np.ndarray, rounds: int) -> np.ndarray:
    """Laplacian smoothing: each round moves every vertex halfway to its neighbours' mean (the
    voxel staircase becomes a surface)."""
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])
    count = np.bincount(edges[:, 0], minlength=len(vertices))[:, None]
    for _ in range(rounds):
        total = np.zeros_like(vertices)
        np.add.at(total, edges[:, 0], vertices[edges[:, 1]])
        vertices = 0.5 * vertices + 0.5 * total / np.maximum(count, 1)
    return vertices


def _aneurism_scene(stride: int = 4, level: float = 0.3) -> Scene:
    """A scanned shape that no calibration or validation scene resembles: the vessel tree of
    the shipped aneurism CT volume (rotational X-ray), the voxels above ``level`` after a max
    over ``stride``³ blocks, their surface smoothed: thin branching tubes in open space."""
    data = load_volume("aneurism").data  # (z, y, x)
    z, y, x = (n // stride for n in data.shape)
    blocks = data[: z * stride, : y * stride, : x * stride].reshape(z, stride, y, stride, x,
                                                                    stride)
    occupied = blocks.max(axis=(1, 3, 5)) > level * float(data.max())
    vertices, faces = _voxel_surface(occupied.transpose(2, 1, 0))  # (x, y, z)
    vertices = _smooth(vertices, faces, rounds=4) * stride  # in voxels of the volume
    return scene_from_mesh("aneurism", *clean_mesh(vertices, faces, "aneurism CT surface"))


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
    "grass": _grass_scene,
    "terrain": _terrain_scene,
    "aneurism": _aneurism_scene,
}


def reorient(scene: Scene, up: str) -> Scene:
    """The scene turned so that its axis ``up`` points up (+y): vertices, camera and light."""
    rot = _up_rotation(up)
    if up == "y":
        return scene

    def turn(p) -> tuple[float, float, float]:
        return tuple(map(float, rot @ np.asarray(p, np.float64)))

    cam = scene.camera
    camera = Camera(turn(cam.eye), turn(cam.target), cam.up, cam.fov_y)
    vertices = (scene.vertices.astype(np.float64) @ rot.T).astype(np.float32)
    return Scene(scene.name, vertices, scene.faces, camera,
                 np.asarray(turn(scene.light), np.float32), load_info=scene.load_info)


def _up_rotation(up: str) -> np.ndarray:
    if up not in UP_AXES:
        raise SceneError(f"unknown up axis {up!r}; use one of {', '.join(UP_AXES)}")
    return UP_AXES[up]


def load_scene(name_or_path: str | Path, up: str = "y",
               mesh_loader: Callable[[Path], tuple[np.ndarray, np.ndarray]] = load_mesh) -> Scene:
    """A shipped or procedural scene by name, or a mesh file by path.

    ``up`` names the axis of the scene that points up (``"z"`` for a Z-up mesh), ``-`` for the
    negative one. ``mesh_loader`` reads a mesh file (an application may pass a caching one).
    ``scene.load_info["load_seconds"]`` says how long loading took.
    """
    started = time.perf_counter()
    key = str(name_or_path)
    rot = _up_rotation(up)
    if key in SCENES:
        scene = reorient(SCENES[key](), up)
    else:
        path = Path(key)
        if not (path.suffix.lower() in (*MESH_SUFFIXES, ".gz") or path.exists()):
            raise SceneError(f"unknown scene {key!r}; known scenes: {', '.join(SCENES)} "
                             f"(autotune scenes lists them), or a path to an .obj/.ply file")
        vertices, faces = mesh_loader(path)
        if up != "y":
            vertices = (vertices.astype(np.float64) @ rot.T).astype(np.float32)
        scene = scene_from_mesh(path.name, vertices, faces)
    scene.load_info["load_seconds"] = time.perf_counter() - started
    return scene
