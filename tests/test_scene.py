"""Scene loading: shipped assets, mesh files in every supported form, and bad input."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import trimesh

from raytracer.mesh.scene import SCENES, SceneError, load_mesh, load_scene

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


# ---- issue 10: messages that name the real problem -------------------------------------------

PLY_HEADER = ("ply\nformat ascii 1.0\nelement vertex {v}\nproperty float x\nproperty float y\n"
              "property float z\nelement face {f}\nproperty list uchar int vertex_indices\n"
              "end_header\n")
PLY_BODY = "0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n"


def test_latin1_comment_in_obj_loads_without_charset_detection(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "charset_normalizer", None)  # not installed
    p = tmp_path / "cafe.obj"
    p.write_bytes(b"# caf\xe9 au lait\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    v, f = load_mesh(p)
    assert len(v) == 3 and len(f) == 1


def test_missing_package_is_not_blamed_on_the_file(tmp_path, monkeypatch):
    def load(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'somepkg'", name="somepkg")

    monkeypatch.setattr(trimesh, "load", load)
    p = tmp_path / "ok.obj"
    p.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(SceneError) as exc:
        load_mesh(p)
    assert "malformed" not in str(exc.value) and "pip install somepkg" in str(exc.value)


def test_obj_with_vertices_but_no_faces(tmp_path):
    p = tmp_path / "points.obj"
    p.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    with pytest.raises(SceneError, match="points.obj: has 3 vertices but no faces"):
        load_mesh(p)


def test_ascii_ply_whose_header_overstates_the_counts_is_truncated(tmp_path):
    p = tmp_path / "short.ply"
    p.write_text(PLY_HEADER.format(v=6, f=2) + PLY_BODY)
    with pytest.raises(SceneError, match="short.ply: truncated ASCII PLY"):
        load_mesh(p)


def test_ascii_ply_whose_header_understates_the_counts_fails(tmp_path):
    p = tmp_path / "long.ply"
    p.write_text(PLY_HEADER.format(v=4, f=1) + PLY_BODY)  # a face left out silently before
    with pytest.raises(SceneError, match="long.ply: .* declares only"):
        load_mesh(p)


def test_exact_ascii_ply_loads(tmp_path):
    p = tmp_path / "ok.ply"
    p.write_text(PLY_HEADER.format(v=4, f=2) + PLY_BODY + "\n")
    v, f = load_mesh(p)
    assert len(v) == 4 and len(f) == 2


def test_fifo_named_obj_is_an_error_not_a_hang(tmp_path):
    import os
    import threading

    p = tmp_path / "pipe.obj"
    os.mkfifo(p)
    result = []

    def load():
        try:
            load_scene(str(p))
        except SceneError as exc:
            result.append(str(exc))

    thread = threading.Thread(target=load, daemon=True)  # a hang must not block pytest's exit
    thread.start()
    thread.join(20)
    assert result and "not a regular file" in result[0]


def test_up_axis_turns_a_z_up_mesh_upright(tmp_path):
    p = tmp_path / "column.obj"  # a thin column along z: z is up in the file
    p.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 10\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    lo, hi = load_scene(str(p)).bounds
    assert np.argmax(hi - lo) == 2
    scene = load_scene(str(p), up="z")
    lo, hi = scene.bounds
    assert np.argmax(hi - lo) == 1 and hi[1] == pytest.approx(10)  # now up along +y
    flipped = load_scene(str(p), up="-z")
    assert flipped.bounds[0][1] == pytest.approx(-10)
    assert scene.camera.eye[1] > scene.center[1]  # the default view looks from above, as usual


def test_up_axis_on_a_shipped_scene_moves_camera_and_light_too(scenes):
    base = scenes("spheres")
    turned = load_scene("spheres", up="x")
    rot = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
    assert np.allclose(turned.vertices, base.vertices @ rot.T, atol=1e-5)
    assert np.allclose(turned.camera.eye, rot @ np.asarray(base.camera.eye))
    assert np.allclose(turned.light, rot @ base.light)
    with pytest.raises(SceneError, match="unknown up axis"):
        load_scene("spheres", up="w")
    assert load_scene("spheres").load_info["load_seconds"] > 0
