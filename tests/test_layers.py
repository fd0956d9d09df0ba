"""The layers of docs/architecture.md, checked with import-linter's one layers contract
(pyproject.toml).

The contracts are run on this tree, and on copies of it with one import that climbs a layer
injected, each of which must break them: a contract that cannot fail checks nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from studies.pipeline_mapping.model.graph import strongly_connected

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "autotune", "models", "raytracer", "governed", "studies", "autotune_app",
            "benchmarks")
LAYERS = "One folder per layer"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """Run ``lint-imports`` on the packages under ``root`` with the contracts of this project."""
    script = ("import sys; sys.path.insert(0, sys.argv[1]); from importlinter.cli import "
              "lint_imports_command; lint_imports_command(['--config', sys.argv[2], '--no-cache'])")
    return subprocess.run([sys.executable, "-c", script, str(root), str(ROOT / "pyproject.toml")],
                          cwd=root, capture_output=True, text=True, timeout=120)


def _copy_tree(dest: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, dest / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.nb[ic]", "data", "results",
                                                      "kernels", "*.png", "*.json"))
    return dest


def test_the_tree_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout and " 1 kept" in result.stdout, result.stdout


def test_one_contract_names_every_top_package():
    """Every package the project ships is a layer of the one contract: none escapes it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    named = {name.strip(" ()") for layer in contract["layers"] for name in layer.split("|")}
    assert contract["type"] == "layers" and named == set(PACKAGES) == set(config["root_packages"])
    shipped = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()} - {"tools"}
    assert shipped == set(PACKAGES)


# (module that gains the import, the import, a contract it must break)
# (module that gains the import, the import): each climbs a floor or joins two libraries that
# stand side by side, and must break the one layers contract
VIOLATIONS = [
    ("common/atomic_files.py", "import models.workload"),
    ("models/workload.py", "import raytracer.camera"),
    ("models/hong_kim.py", "import autotune.knobs"),
    ("raytracer/camera.py", "import autotune.tuner"),
    ("raytracer/mesh/bvh/build.py", "import models.workload"),
    ("autotune/knobs.py", "import raytracer.mesh.scene"),
    ("raytracer/mesh/tracer.py", "import governed.mesh.probe"),
    ("governed/mesh/probe.py", "import studies.kernel_models.bsp"),
    ("studies/cluster_prediction/model.py", "import autotune_app.report"),
    ("autotune/tuner.py", "import autotune_app.report"),
    ("governed/volume/knobs.py", "import benchmarks.governed.tracer_tuned"),
    ("autotune_app/report.py", "import benchmarks.governed.tracer_tuned"),
]


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory):
    return _copy_tree(tmp_path_factory.mktemp("tree"))


def test_a_clean_copy_keeps_the_contracts(clean_copy):
    """The copy the violations are injected into passes as it is (so they are what breaks)."""
    result = lint_imports(clean_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("module, line", VIOLATIONS, ids=[f"{m}:{line}" for m, line in VIOLATIONS])
def test_an_import_that_climbs_a_layer_breaks_the_contract(clean_copy, tmp_path, module, line):
    tree = tmp_path / "tree"
    shutil.copytree(clean_copy, tree)
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # injected by the test\n")
    result = lint_imports(tree)
    assert result.returncode != 0, f"{module}: `{line}` did not break a contract"
    broken = result.stdout.split("Broken contracts")[-1]
    assert LAYERS in broken and line.split()[-1] in broken, result.stdout


def import_cycles(modules: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of an import graph ``{module: modules it imports}``: its strongly connected
    components of more than one module (the mapping study's Tarjan, written once)."""
    vertices = sorted(modules)
    edges = [(m, i) for m in vertices for i in sorted(modules[m]) if i in modules]
    return [sorted(c) for c in strongly_connected(vertices, edges) if len(c) > 1]


def test_no_module_imports_itself_through_others():
    """No import cycle at any scale, lazy imports included (grimp reads them all)."""
    import grimp

    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    modules = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    assert import_cycles(modules) == []


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
