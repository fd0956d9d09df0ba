"""The repository's developer tools (``tools/``), loaded by path from the checkout beside the
benchmarks: they are not shipped with the package, and ``autotune bench`` runs with the console
script's folder on ``sys.path``, not the repository's, so ``import tools.x`` would fail."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as a module; FileNotFoundError outside a checkout."""
    path = TOOLS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(f"{path} is missing: the benchmark is not running from a "
                                f"checkout")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module
