"""The one exception of the volume library, so callers (and every MPI rank) catch one type."""

from __future__ import annotations


class VolumeError(ValueError):
    """A volume, transfer function or render setting is unusable; the message names the file
    or value and the problem."""
