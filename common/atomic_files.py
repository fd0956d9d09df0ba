"""Every file and folder the product writes goes through here: nothing half-written, nothing lost.

Files are written to a temporary file in the target's folder and renamed over the target, so a
reader sees the old file or the new one, never a mix. Output folders are built beside the target
and renamed into place; an existing non-empty folder is refused unless the caller passes
``force``, and even then only same-named files are replaced (nothing the user had is deleted).
Permissions follow the umask, as a plain ``open()`` would.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


class OutputError(OSError):
    """An output path cannot be written; the message names it and says why."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_parent(path: Path) -> None:
    parent = path.parent
    if not parent.exists():
        raise OutputError(f"{path}: folder {parent} does not exist")
    if not parent.is_dir():
        raise OutputError(f"{path}: {parent} is not a folder")
    if path.is_dir():
        raise OutputError(f"{path}: is a folder; give a file name")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: folder {parent} is not writable")


def check_writable_file(path: str | os.PathLike[str]) -> Path:
    """Fail now, before any long work, if ``path`` could not be written later."""
    path = Path(path)
    _check_parent(path)
    return path


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename)."""
    path = check_writable_file(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 text atomically."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> Path:
    """Write ``obj`` as JSON atomically (numpy scalars and arrays become plain numbers/lists)."""
    return write_text(path, json.dumps(obj, indent=indent, default=_json_default) + "\n")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def save_png(image: np.ndarray, path: str | os.PathLike[str], compress_level: int = 6) -> Path:
    """Write an (H, W[, 3|4]) uint8 image as PNG atomically. The name must end in ``.png``.
    ``compress_level`` 0-9 is zlib's (1: a few times faster, a larger file)."""
    from PIL import Image  # lazy: only PNG writers need pillow

    path = Path(path)
    if path.suffix.lower() != ".png":
        raise OutputError(f"{path}: images are written as PNG; use a name ending in .png")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG",
                                                      compress_level=compress_level)
    return write_bytes(path, buf.getvalue())


def save_figure(fig: Any, path: str | os.PathLike[str], dpi: int = 90) -> Path:
    """Write a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt  # lazy: a slow import; only figure writers need it

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return write_bytes(path, buf.getvalue())


def check_output_dir(path: str | os.PathLike[str], force: bool = False) -> Path:
    """Fail now if ``output_dir(path, force)`` would refuse; returns the path."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: exists and is not a folder")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise OutputError(f"{path}: folder exists and is not empty; choose a new folder or pass "
                          "--force to write into it (same-named files are replaced, nothing "
                          "else is deleted)")
    parent = (path if path.is_dir() else path.parent).resolve()
    if not parent.exists():
        raise OutputError(f"{path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: folder {parent} is not writable")
    return path


@contextlib.contextmanager
def output_dir(path: str | os.PathLike[str], force: bool = False) -> Iterator[Path]:
    """Yield a folder to write into that becomes ``path`` only if the block succeeds.

    A new (or empty) ``path`` is built in a hidden sibling folder and renamed into place; on an
    exception the sibling is removed and ``path`` is untouched. With ``force`` an existing
    non-empty folder is written into directly (callers write each file atomically).
    """
    path = check_output_dir(path, force)
    if path.is_dir() and (any(path.iterdir()) or path.resolve() == Path.cwd().resolve()):
        yield path  # the working folder cannot be replaced by a rename (``--out .``)
        return
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp",
                                 dir=path.resolve().parent))
    try:
        yield work
        os.chmod(work, 0o777 & ~_umask())
        if path.is_dir():
            path.rmdir()  # empty: checked above, so nothing of the user's goes
        os.replace(work, path)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
