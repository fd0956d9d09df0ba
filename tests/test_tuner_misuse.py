"""A frame chosen and never observed is a lost measurement: the Tuner says so, once."""

import warnings

import numpy as np
import pytest

from autotune import AutotuneWarning, BoolKnob, IntKnob, KnobSpace, Tuner

SPACE = KnobSpace([IntKnob("ao_rays", 0, 64), BoolKnob("shadows")])


def model(c: dict) -> np.ndarray:
    return 0.002 + 0.0002 * c["ao_rays"] + 0.004 * c["shadows"]


def _unobserved_warnings(caught) -> list:
    return [w for w in caught if issubclass(w.category, AutotuneWarning)
            and "before observe()" in str(w.message)]


def test_choose_twice_without_observe_warns_once() -> None:
    tuner = Tuner(SPACE, model, 0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            tuner.choose()
    assert len(_unobserved_warnings(caught)) == 1
    assert tuner.trouble["unobserved-frame"] == 3


def test_nested_frame_warns() -> None:
    tuner = Tuner(SPACE, model, 0.01)
    with pytest.warns(AutotuneWarning, match="do not nest frame"), tuner.frame(), tuner.frame():
        pass


def test_normal_use_and_a_failed_frame_do_not_warn() -> None:
    tuner = Tuner(SPACE, model, 0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            tuner.choose()
            tuner.observe(0.01)
        with pytest.raises(RuntimeError), tuner.frame():
            raise RuntimeError("render failed")
        with tuner.frame():
            pass
    assert _unobserved_warnings(caught) == []
