"""``bench volume-tuned``'s fixed run settings: the mid-run target drop and the mark of the MPI
job's result line (its volumes: :mod:`governed.volume.volume_sets`)."""

from __future__ import annotations

MARK = "RESULT "
TARGET_DROP = 0.7  # the mid-run target change: to 70 % of the target
