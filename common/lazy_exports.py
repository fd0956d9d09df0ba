"""Package attributes that import their module on first use (PEP 562).

The rendering library's packages export their public names this way so that importing one part
(the CPU probe) does not load another's heavy dependencies (pyopencl).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose ``exports`` map a submodule name to the
    names it provides."""
    where = {name: module for module, names in exports.items() for name in names}

    def getattr_(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    def dir_() -> list[str]:
        return sorted(set(importlib.import_module(package).__dict__) | set(where))

    return getattr_, dir_
