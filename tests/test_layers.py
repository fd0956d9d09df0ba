"""The layers of the README's "Architecture", checked with import-linter (pyproject.toml).

The contracts are run on this tree, and on copies of it with one import that climbs a layer
injected, each of which must break them: a contract that cannot fail checks nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("autotune", "raytracer", "models", "benchmarks")


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
    assert " 0 broken" in result.stdout and " 7 kept" in result.stdout, result.stdout


# (module that gains the import, the import, a contract it must break)
VIOLATIONS = [
    ("models/workload.py", "import raytracer.camera", "models imports nothing of ours"),
    ("models/hong_kim.py", "import autotune.knobs", "models imports nothing of ours"),
    ("raytracer/camera.py", "import autotune.tuner", "import the tuner"),
    ("raytracer/bvh/build.py", "import models.workload", "import the models"),
    ("raytracer/tracer.py", "import raytracer.tuning.probe", "never imports its tuning glue"),
    ("autotune/knobs.py", "import raytracer.scene", "import the renderers"),
    ("autotune/tuner.py", "import autotune.app.report", "Nothing below the applications"),
    ("autotune/feedback.py", "import benchmarks.paper", "Nothing below the applications"),
    ("raytracer/tuning/probe.py", "import autotune.app.report", "On top"),
    ("autotune/app/report.py", "import benchmarks.paper", "On top"),
]


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory):
    return _copy_tree(tmp_path_factory.mktemp("tree"))


def test_a_clean_copy_keeps_the_contracts(clean_copy):
    """The copy the violations are injected into passes as it is (so they are what breaks)."""
    result = lint_imports(clean_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("module, line, contract", VIOLATIONS,
                         ids=[f"{m}:{line}" for m, line, _ in VIOLATIONS])
def test_an_import_that_climbs_a_layer_breaks_a_contract(clean_copy, tmp_path, module, line,
                                                         contract):
    tree = tmp_path / "tree"
    shutil.copytree(clean_copy, tree)
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # injected by the test\n")
    result = lint_imports(tree)
    assert result.returncode != 0, f"{module}: `{line}` did not break a contract"
    broken = result.stdout.split("Broken contracts")[-1]
    assert contract in broken and line.split()[-1] in broken, result.stdout
