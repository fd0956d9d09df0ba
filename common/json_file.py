"""Reading JSON documents with one clear error that names the file and what is wrong with it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def read_json(path: Path, error: type[Exception], what: str, missing_hint: str = "") -> Any:
    """Parse ``path``; a missing, unreadable or corrupt file raises ``error`` naming it.

    ``what`` names the kind of file in the message ("profile", "kernel counts").
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error(f"{path}: {what} file not found{missing_hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot read {what} ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{path}: not valid JSON (truncated or corrupt?): {exc.msg} "
            f"at line {exc.lineno} column {exc.colno}"
        ) from None


def versioned(kind: str, version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """A document of ``kind`` at ``version``: what every versioned file of ours starts with."""
    return {"kind": kind, "version": version, **body}


def check_versioned(d: Any, kind: str, version: int, where: str, error: type[Exception],
                    what: str, hint: str = "") -> Mapping[str, Any]:
    """``d`` if it is a ``kind`` document of ``version``; else ``error`` naming ``where``."""
    if not isinstance(d, Mapping) or d.get("kind") != kind:
        raise error(f"{where}: not an autotune {what}")
    if d.get("version") != version:
        raise error(f"{where}: {what} version {d.get('version')!r}; this version reads "
                    f"{version}{hint}")
    return d
