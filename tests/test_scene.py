"""Scene loading: shipped assets, mesh files in every supported form, and bad input."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import trimesh

from raytracer.scene import SCENES, SceneError, load_mesh, load_scene

EXPECTED_TRIANGLES = {"bunny": 69451, "dragon": 202520, "dragon-small": 11102}


@pytest.mark.parametrize("name", sorted(SCENES))
def test_every_scene_loads_with_camera_light_and_bounds(scenes, name):
    s = scenes(name)
    assert s.triangle_count > 0
    assert s.vertices.dtype == np.float32 and s.faces.dtype == np.int32
    lo, hi = s.bounds
    assert np.all(hi > lo) and s.diagonal > 0
    assert s.normals.shape == s.vertices.shape
    assert np.isfinite(s.light).all()
    assert s.camera.eye != s.camera.target
    if name in EXPECTED_TRIANGLES:
        assert s.triangle_count == EXPECTED_TRIANGLES[name]


def _tetra() -> trimesh.Trimesh:
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    f = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    return trimesh.Trimesh(v, f, process=False)


@pytest.mark.parametrize("kind, gz", [("obj", False), ("ply", False), ("ply-binary", False),
                                      ("obj", True), ("ply", True)])
def test_mesh_files_in_every_form(tmp_path, kind, gz):
    mesh = _tetra()
    if kind == "ply-binary":
        data, suffix = mesh.export(file_type="ply", encoding="binary"), ".ply"
    elif kind == "ply":
        data, suffix = mesh.export(file_type="ply", encoding="ascii"), ".ply"
    else:
        data, suffix = mesh.export(file_type="obj"), ".obj"
    data = data.encode() if isinstance(data, str) else data
    path = tmp_path / f"m{suffix}{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data) if gz else data)
    v, f = load_mesh(path)
    assert len(f) == 4 and len(v) == 4
    scene = load_scene(path)
    assert scene.triangle_count == 4


def test_unknown_scene_lists_known_ones():
    with pytest.raises(SceneError, match="unknown scene 'teapot'.*dragon.*sibenik"):
        load_scene("teapot")


def test_missing_file_is_named(tmp_path):
    with pytest.raises(SceneError, match="nothere.obj: file not found"):
        load_mesh(tmp_path / "nothere.obj")


def test_unsupported_format(tmp_path):
    p = tmp_path / "mesh.stl"
    p.write_text("solid x")
    with pytest.raises(SceneError, match="unsupported mesh format"):
        load_mesh(p)


@pytest.mark.parametrize("content", [
    "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
    "property float z\nelement face 1\nproperty list uchar int vertex_indices\nend_header\n"
    "0 0 0\n1 0\n",  # truncated body
    "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n",  # truncated header
    "this is not a ply file at all\n",
])
def test_malformed_or_truncated_ply(tmp_path, content):
    p = tmp_path / "bad.ply"
    p.write_text(content)
    with pytest.raises(SceneError, match="bad.ply"):
        load_mesh(p)


def test_truncated_binary_ply(tmp_path):
    data = _tetra().export(file_type="ply", encoding="binary")
    p = tmp_path / "cut.ply"
    p.write_bytes(data[: len(data) - 20])
    with pytest.raises(SceneError, match="cut.ply"):
        load_mesh(p)


def test_truncated_gzip(tmp_path):
    data = gzip.compress(_tetra().export(file_type="ply", encoding="binary"))
    p = tmp_path / "cut.ply.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(SceneError, match="cut.ply.gz"):
        load_mesh(p)


def test_empty_mesh(tmp_path):
    p = tmp_path / "empty.obj"
    p.write_text("# nothing here\n")
    with pytest.raises(SceneError, match="empty.obj: mesh has no"):
        load_mesh(p)


def test_obj_with_bad_face_index(tmp_path):
    p = tmp_path / "idx.obj"
    p.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 9\n")
    with pytest.raises(SceneError, match="idx.obj"):
        load_mesh(p)


def test_nan_vertices(tmp_path):
    p = tmp_path / "nan.obj"
    p.write_text("v 0 0 0\nv nan 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(SceneError, match="nan.obj: 1 vertices have NaN or infinite"):
        load_mesh(p)


def test_degenerate_triangles_dropped_with_warning(tmp_path):
    p = tmp_path / "deg.obj"
    p.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 2 0 0\nf 1 2 3\nf 1 2 4\nf 1 1 2\n")
    with pytest.warns(UserWarning, match="deg.obj: dropped 2 degenerate triangles of 3"):
        v, f = load_mesh(p)
    assert len(f) == 1


def test_all_degenerate_is_an_error(tmp_path):
    p = tmp_path / "flat.obj"
    p.write_text("v 0 0 0\nv 1 0 0\nv 2 0 0\nf 1 2 3\n")
    with pytest.raises(SceneError, match="flat.obj: all 1 triangles are degenerate"):
        load_mesh(p)
