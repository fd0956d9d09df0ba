"""The set-up's objects leave the garbage collector's generations; garbage is collected first."""

import gc
import weakref

from common.collector import freeze_set_up


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_freeze_collects_the_garbage_first_then_freezes_what_is_alive() -> None:
    garbage, alive = _Node(), _Node()
    gone = weakref.ref(garbage)
    del garbage
    try:
        freeze_set_up()
        assert gone() is None  # collected, not frozen
        assert gc.get_freeze_count() > 0
        assert not any(o is alive for o in gc.get_objects())  # out of every generation
    finally:
        gc.unfreeze()
