"""Writing images without leaving half-written files behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image


def save_png(image: np.ndarray, path: str | Path) -> None:
    """Write an (H, W, 3|4) uint8 image as PNG: temporary file in the same folder, then rename."""
    path = Path(path)
    if not path.parent.exists():
        raise OSError(f"{path}: folder {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            Image.fromarray(image).save(f, format="PNG")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
