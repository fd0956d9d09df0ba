"""numba's on-disk cache, keyed on every package source a compiled function can read.

numba keys a cached function on its own file's timestamp, yet compiles into it what it takes
from the modules it imports: functions it inlines and constants, frozen at their values then.
After ``traversal.py`` alone changed (8-wide nodes), the cached ``cpu_render.trace_tiles``
kept the old traversal and crashed on the new nodes; a constant imported from another file
would stay at its old value the same way. :func:`njit` caches each module's functions in a
folder named by the digest of that module's source and of every package module it imports,
transitively, so a change to any of them compiles afresh and nothing else does.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from common.cache_folder import cache_dir

#: The project's packages that hold numba-compiled code or constants it reads (the renderers'
#: CPU kernels, the governed volume renderer's workload probe, the tuner's grid selection); a
#: module of any other package is not keyed.
PACKAGES = ("autotune", "models", "raytracer", "governed", "common")
PROJECT_ROOT = Path(__file__).resolve().parents[1]  # the folder holding raytracer/ and its siblings


def module_file(name: str) -> Path | None:
    """The source file of project module ``name`` (``raytracer.x.y``), or None."""
    parts = name.split(".")
    if parts[0] not in PACKAGES:
        return None
    base = PROJECT_ROOT.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


_NAMES = "|".join(PACKAGES)
#: ``from raytracer.x import a, b`` (parenthesised names may span lines) at any indentation
FROM_IMPORT = re.compile(rf"^[ \t]*from[ \t]+((?:{_NAMES})(?:\.\w+)*)[ \t]+import[ \t]+"
                         r"(\([^)]*\)|[^\n]*)", re.M)
#: ``import raytracer.x``
PLAIN_IMPORT = re.compile(rf"^[ \t]*import[ \t]+((?:{_NAMES})(?:\.\w+)*)", re.M)


@cache
def imported_files(path: Path) -> tuple[Path, ...]:
    """The package modules whose source ``path`` imports, at any depth in the file (``from
    raytracer.x import y`` names ``x``, and ``x.y`` where that is a module). A text scan, not a
    parse (a tenth of the time at every start): an import written in a docstring counts too,
    which can only widen the key."""
    text = path.read_text(encoding="utf-8")
    names = [m.group(1) for m in PLAIN_IMPORT.finditer(text)]
    for m in FROM_IMPORT.finditer(text):
        names.append(m.group(1))
        listed = m.group(2).split("#")[0].strip("() \n")
        names += [f"{m.group(1)}.{item.split()[0]}" for item in listed.replace("\n", " ")
                  .split(",") if item.strip()]
    return tuple(sorted({p for p in map(module_file, names) if p is not None}))


@cache
def source_digest(path: Path) -> str:
    """Digest of ``path`` and of every package source it imports, transitively."""
    seen: set[Path] = set()
    todo = [path.resolve()]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += imported_files(p)
    digest = hashlib.sha256()
    for p in sorted(seen):
        digest.update(p.relative_to(PROJECT_ROOT).as_posix().encode())
        digest.update(p.read_bytes())
    return digest.hexdigest()[:16]


def cache_root() -> Path:
    """``$NUMBA_CACHE_DIR/autotune-keyed`` if the user set one, else the package's cache
    folder (:func:`common.cache_folder.cache_dir`) ``/numba``."""
    user = os.environ.get("NUMBA_CACHE_DIR")
    return Path(user) / "autotune-keyed" if user else cache_dir() / "numba"


def compiled_before(path: Path) -> bool:
    """Whether numba has cached functions of module ``path`` (at its current source and
    imports) here: else its first use compiles them, which a command should say before it
    starts (the BVH builder: about half a minute on 2 cores)."""
    folder = cache_root() / source_digest(Path(path).resolve())
    return folder.is_dir() and any(folder.rglob("*.nbi"))


def njit(**options: Any) -> Callable[[Callable], Any]:
    """``numba.njit(cache=True, **options)``, cached under the digest of the function's module
    and its package imports (where the folder cannot be written, numba caches beside the
    source as usual)."""
    import numba  # lazy: a heavy import; span_blend needs njit only for big spans

    def compile_cached(func: Callable) -> Any:
        folder = cache_root() / source_digest(Path(inspect.getfile(func)))
        saved = numba.config.CACHE_DIR
        numba.config.CACHE_DIR = str(folder)  # read once, when the dispatcher is made
        try:
            return numba.njit(cache=True, **options)(func)
        finally:
            numba.config.CACHE_DIR = saved

    return compile_cached
