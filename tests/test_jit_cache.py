"""numba's cache keyed on the package sources a compiled function can read."""

from __future__ import annotations

from pathlib import Path

from common import jit_cache
from common.jit_cache import cache_root, imported_files, source_digest


def _fresh(monkeypatch, root: Path) -> None:
    monkeypatch.setattr(jit_cache, "PROJECT_ROOT", root)
    imported_files.cache_clear()
    source_digest.cache_clear()


def test_digest_changes_with_any_imported_source_and_only_those(tmp_path, monkeypatch):
    root = tmp_path
    (root / "raytracer" / "sub").mkdir(parents=True)
    files = {"__init__.py": "", "sub/__init__.py": "",
             "a.py": "import math\nfrom raytracer.b import K\n",
             "b.py": "def f():\n    from raytracer.sub import c\n    return c.X\nK = 1\n",
             "sub/c.py": "X = 2\n", "d.py": "Y = 3\n"}
    pkg = root / "raytracer"
    for name, text in files.items():
        (pkg / name).write_text(text)
    _fresh(monkeypatch, root)
    before = source_digest(pkg / "a.py")
    assert source_digest(pkg / "a.py") == before
    (pkg / "d.py").write_text("Y = 4\n")  # a.py imports nothing of it
    _fresh(monkeypatch, root)
    assert source_digest(pkg / "a.py") == before
    (pkg / "sub/c.py").write_text("X = 5\n")  # imported by b (inside a function), b by a
    _fresh(monkeypatch, root)
    assert source_digest(pkg / "a.py") != before


def test_the_cpu_renderer_is_cached_under_the_digest_of_the_traversal_it_inlines():
    from raytracer.mesh import cpu_render

    here = Path(cpu_render.__file__).resolve()
    assert {p.name for p in imported_files(here)} >= {"traversal.py"}
    assert here.parent / "bvh" / "__init__.py" in imported_files(here.parent / "traversal.py")
    folder = cache_root() / source_digest(here)
    assert Path(cpu_render.trace_tiles.stats.cache_path).is_relative_to(folder)


def test_a_numba_cache_dir_the_user_set_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert cache_root().is_relative_to(tmp_path)


def test_package_modules_are_found_from_the_common_layer():
    """jit_cache lives in common/ but keys on every module of the packages that hold numba code
    (the governed volume renderer's probe and the tuner's grid selection among them), and on
    nothing else."""
    import raytracer

    root = Path(raytracer.__file__).resolve().parent
    assert root.parent == jit_cache.PROJECT_ROOT
    assert jit_cache.module_file("raytracer.mesh.tracer") == root / "mesh" / "tracer.py"
    assert (jit_cache.module_file("governed.volume.workload_probe")
            == root.parent / "governed" / "volume" / "workload_probe.py")
    assert jit_cache.module_file("autotune.search") == root.parent / "autotune" / "search.py"
    assert jit_cache.module_file("numpy") is None
    assert jit_cache.module_file("raytracer.device.choice") == root / "device" / "choice.py"
    assert jit_cache.module_file("raytracer.device") == root / "device" / "__init__.py"
