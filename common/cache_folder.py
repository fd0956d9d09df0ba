"""The user's cache folder: where measured device traits, kernel launches, the pip runtimes'
vendor folder and numba's compiled functions are kept between runs."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "AUTOTUNE_CACHE_DIR"


def cache_dir() -> Path:
    """``$AUTOTUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/autotune``, else ``~/.cache/autotune``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "autotune"
