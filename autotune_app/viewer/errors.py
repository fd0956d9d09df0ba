"""The viewer's one exception: it cannot start or go on, and the message says why."""

from __future__ import annotations


class ViewerError(RuntimeError):
    """The viewer cannot start or go on; the message says why and what to do instead."""
