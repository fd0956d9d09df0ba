"""Keep Python's cyclic garbage collector out of the governed frames.

A full (oldest-generation) collection walks every object the process holds: with a volume,
its bricks, the compiled kernels and the models set up, one took 15-68 ms in the ranks of
``autotune bench volume-tuned`` (logged by a ``gc.callbacks`` hook, 2-core Zen 4), and one
landing in a 20 ms governed frame is a spike that neither the model nor the feedback can
price. A governed renderer whose set-up is a long step of its own (the volume renderer's
calibration) calls :func:`freeze_set_up` at its end: what is alive then is collected once
and moved out of the collector's reach (``gc.freeze``), so later collections walk only what
the frames allocate. The price: an object alive then that later becomes garbage is still
freed by reference counting, but a reference cycle among such objects is never collected.
"""

from __future__ import annotations

import gc


def freeze_set_up() -> None:
    """Collect the garbage of the set-up, then freeze every object alive (see the module)."""
    gc.collect()
    gc.freeze()
