"""Shared-memory clean-up: removes the MPICH segments a killed or aborted job left behind."""

from __future__ import annotations

import contextlib
from pathlib import Path

SHM_DIR = Path("/dev/shm")  # where MPICH keeps its shared-memory segments (Linux)


def remove_orphaned_segments(since: float, shm_dir: Path = SHM_DIR) -> list[str]:
    """Remove MPICH's shared-memory segments (``mpich_shm_*``) made at or after ``since``
    (epoch seconds) that no live process maps: what a job whose ranks were killed or aborted
    leaves behind (4 MiB each, never freed otherwise). Returns the names removed."""
    if not shm_dir.is_dir():
        return []
    found = {}
    for path in shm_dir.glob("mpich_shm_*"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime >= since:
                found[path.name] = path
    for maps in Path("/proc").glob("[0-9]*/maps"):
        if not found:
            break
        try:
            text = maps.read_text()
        except OSError:
            continue
        for name in [n for n in found if n in text]:
            del found[name]
    for path in found.values():
        with contextlib.suppress(OSError):
            path.unlink()
    return sorted(found)
