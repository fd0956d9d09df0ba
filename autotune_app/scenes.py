"""Scenes for the commands: loading with a cache of converted meshes, and the shipped list.

Parsing a big text mesh (an ASCII PLY of a million triangles takes tens of seconds) is done
once: the validated arrays are kept as ``.npz`` in the user cache folder, keyed by the file's
absolute path, modification time and size, so an edited file is parsed again.
"""

from __future__ import annotations

import hashlib
import io
import os
import warnings
from pathlib import Path

import numpy as np

from common.atomic_files import write_bytes
from raytracer.mesh.scene import (
    DEFAULT_SCENE,
    SCENES,
    Scene,
    mesh_file_stat,
    mesh_kind,
    read_mesh,
    warn_degenerate,
)
from raytracer.mesh.scene import load_scene as _load_scene

MESH_CACHE_ENV = "AUTOTUNE_MESH_CACHE"
CACHE_MIN_BYTES = 1 << 20  # smaller files parse faster than the cache is worth
CACHE_VERSION = 1

SCENE_NOTES = {
    "bunny": "Stanford bunny (scanned mesh)",
    "dragon": "Stanford dragon (scanned mesh)",
    "dragon-small": "the dragon decimated (quick tests)",
    "sibenik": "Sibenik cathedral interior (architecture, camera inside)",
    "spheres": "procedural: four spheres on a ground plane",
    "city": "procedural: a 48x48 grid of boxes (occlusion-heavy)",
    "grass": "procedural: a field of thin, tall, bent blades (a test scene)",
    "terrain": "procedural: a ridged heightfield seen at grazing angles (a test scene)",
    "aneurism": "vessel tree: the surface of the aneurism CT volume (a test scene)",
}


def mesh_cache_dir() -> Path:
    """``$AUTOTUNE_MESH_CACHE``, else ``$XDG_CACHE_HOME/autotune/meshes`` (``~/.cache``)."""
    if os.environ.get(MESH_CACHE_ENV):
        return Path(os.environ[MESH_CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "autotune" / "meshes"


def _cache_file(path: Path, st: os.stat_result) -> Path:
    key = f"{CACHE_VERSION}\0{path.resolve()}\0{st.st_mtime_ns}\0{st.st_size}"
    return mesh_cache_dir() / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.npz"


class CachingMeshLoader:
    """A ``mesh_loader`` for :func:`raytracer.mesh.scene.load_scene`; ``status`` says what it did:
    ``"hit"``, ``"written"``, ``"not written (<why>)"`` or ``"off"`` (a small file)."""

    def __init__(self) -> None:
        self.status = "off"

    def __call__(self, path: Path) -> tuple[np.ndarray, np.ndarray]:
        mesh_kind(path)
        st = mesh_file_stat(path)
        if st.st_size < CACHE_MIN_BYTES:
            self.status = "off"
            vertices, faces, _ = read_mesh(path)
            return vertices, faces
        cache = _cache_file(path, st)
        try:
            with np.load(cache) as data:
                vertices, faces = data["vertices"], data["faces"]
                dropped = int(data["dropped"])
            self.status = "hit"
            if dropped:
                warn_degenerate(str(path), dropped, len(faces) + dropped)
            return vertices, faces
        except (OSError, KeyError, ValueError, EOFError):
            pass  # not cached yet, or an unreadable entry: parse again and replace it
        vertices, faces, dropped = read_mesh(path)
        buf = io.BytesIO()
        np.savez(buf, vertices=vertices, faces=faces, dropped=np.int64(dropped),
                 source=str(path.resolve()))
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(cache, buf.getvalue())
            self.status = "written"
        except OSError as exc:  # a read-only home must not stop the render
            self.status = f"not written ({getattr(exc, 'strerror', None) or exc})"
        return vertices, faces


def load_scene(name_or_path: str | Path, up: str = "y") -> Scene:
    """Load a scene as the commands do: mesh files through the cache; ``scene.load_info``
    holds ``load_seconds`` and ``mesh_cache``."""
    loader = CachingMeshLoader()
    scene = _load_scene(name_or_path, up=up, mesh_loader=loader)
    if str(name_or_path) not in SCENES:
        scene.load_info["mesh_cache"] = loader.status
    return scene


def shipped_scenes() -> list[dict]:
    """Every named scene with its triangle count and a line about it (loads each once)."""
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, build in SCENES.items():
            rows.append({"name": name, "triangles": build().triangle_count,
                         "default": name == DEFAULT_SCENE, "about": SCENE_NOTES.get(name, "")})
    return rows
