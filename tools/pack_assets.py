"""Pack the shared test meshes into the small compressed arrays the product ships in assets/.

Run once by a developer (``python tools/pack_assets.py ../shared/assets``); the product only
reads the resulting ``assets/*.npz`` files, never the source folder.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import trimesh

from raytracer.mesh.scene import clean_mesh

SOURCES = {
    "bunny": "meshes/stanford_bunny.ply",
    "dragon": "meshes/stanford_dragon_vrip_res2.ply.gz",
    "dragon-small": "meshes/stanford_dragon_vrip_res4.ply.gz",
    "sibenik": "meshes/sibenik.obj",
}


def _load(path: Path) -> trimesh.Trimesh:
    if path.suffix == ".gz":
        with gzip.open(path, "rb") as f:
            return trimesh.load(f, file_type=Path(path.stem).suffix[1:], force="mesh")
    return trimesh.load(path, force="mesh")


def main(source_root: str) -> None:
    out_dir = Path(__file__).resolve().parents[1] / "assets"
    for name, rel in SOURCES.items():
        mesh = _load(Path(source_root) / rel)
        mesh.merge_vertices()
        out = out_dir / f"{name}.npz"
        vertices, faces = clean_mesh(mesh.vertices, mesh.faces, name)
        np.savez_compressed(out, vertices=vertices, faces=faces)
        print(f"{name}: {len(faces)} triangles -> {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/assets")
