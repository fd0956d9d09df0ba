"""The tree keeps the shape docs/architecture.md gives it: the folder listing it documents is
the one on disk, files hold one job (no file over 600 lines, no function over 80 but numba
hot loops that say why), and a module's imports are at its top, bar commented lazy loads.
(The layers themselves are checked by tests/test_layers.py.)"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
CODE = ("common", "autotune", "models", "raytracer", "governed", "studies", "autotune_app",
        "benchmarks", "tools")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
HEADING = re.compile(r"^#{2,4} `([^`]+)`", re.M)
ROW = re.compile(r"^\| `([^`]+)` \|", re.M)


def tracked_entries(folder: str) -> set[str]:
    """What ``ls folder`` shows of the repository (tracked or new, not ignored): names, with a
    trailing slash for folders; hidden names left out."""
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "--",
                          folder], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    prefix = "" if folder in (".", "./") else folder.rstrip("/") + "/"
    entries = set()
    for path in out.splitlines():
        if not (ROOT / path).exists():
            continue  # deleted in the working tree, not yet committed
        rest = path[len(prefix):].split("/")
        if not rest[0].startswith("."):
            entries.add(rest[0] + ("/" if len(rest) > 1 else ""))
    return entries


def documented_listings() -> dict[str, set[str]]:
    """``{folder: entries}`` from each ``### `folder/` `` section's table of the page."""
    text = DOC.read_text()
    heads = list(HEADING.finditer(text))
    listings = {}
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end():nxt.start() if nxt else len(text)]
        listings[head.group(1)] = set(ROW.findall(body))
    return listings


def test_the_documented_listing_is_the_tree():
    listings = documented_listings()
    top = tracked_entries(".")
    folders = {"./", *(name for name in top if name.endswith("/") and name != "tests/")}
    assert folders <= set(listings), f"undocumented folders: {sorted(folders - set(listings))}"
    for folder, documented in listings.items():
        on_disk = tracked_entries(folder)
        assert documented == on_disk, (f"{folder}: on disk, not in docs/architecture.md: "
                                       f"{sorted(on_disk - documented)}; documented, not on disk: "
                                       f"{sorted(documented - on_disk)}")


def python_files() -> list[Path]:
    return sorted(p for folder in CODE for p in (ROOT / folder).rglob("*.py")
                  if "__pycache__" not in p.parts)


def test_no_file_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in python_files()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not long, long


def is_explained_numba_loop(node: ast.FunctionDef, lines: list[str]) -> bool:
    """A numba-compiled function with a comment just above it (above its decorators)."""
    jitted = any("jit" in ast.unparse(d) for d in node.decorator_list)
    first = min([d.lineno for d in node.decorator_list] + [node.lineno])
    return jitted and lines[first - 2].lstrip().startswith("#")


def test_no_function_over_80_lines_but_explained_numba_loops():
    long = []
    for path in python_files():
        text = path.read_text()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                    and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
                    and not is_explained_numba_loop(node, lines)):
                long.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert not long, long


def local_project_imports(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each import of a project module inside a function of ``path``."""
    text = path.read_text()
    lines = text.splitlines()
    found = []
    for func in ast.walk(ast.parse(text)):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(name.split(".")[0] in CODE for name in names):
                found.append((node.lineno, lines[node.lineno - 1]))
    return found


def test_function_local_project_imports_are_commented_lazy_loads():
    bare = [f"{path.relative_to(ROOT)}:{line}: {text.strip()}" for path in python_files()
            for line, text in local_project_imports(path) if "# lazy:" not in text]
    assert not bare, "\n".join(bare)


@pytest.mark.parametrize("source, ok", [
    ("def f():\n    from raytracer.mesh import tracer  # lazy: loads pyopencl\n", True),
    ("def f():\n    from raytracer.mesh import tracer\n", False),
    ("def f():\n    import numpy\n", True),
])
def test_the_import_check_tells_a_lazy_load_from_a_hidden_one(tmp_path, source, ok):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert all("# lazy:" in text for _, text in local_project_imports(path)) == ok


def test_the_readme_is_a_users_guide_of_at_most_300_lines():
    """The rest lives in docs/ (design notes, runtimes, studies, the generated results)."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
