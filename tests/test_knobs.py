"""Knob validation, level ladders and the quality score."""

import math

import numpy as np
import pytest

from autotune import BoolKnob, FloatKnob, IntKnob, KnobSpace


def test_int_knob_levels_respect_step() -> None:
    assert IntKnob("ao_rays", 0, 10, step=4).values.tolist() == [0, 4, 8]


def test_float_knob_is_discretized_evenly() -> None:
    knob = FloatKnob("ao_radius", 1.0, 2.5, levels=4)
    assert np.allclose(knob.values, [1.0, 1.5, 2.0, 2.5])
    assert knob.native(knob.values[1]) == 1.5 and isinstance(knob.native(knob.values[1]), float)


def test_float_knob_at_given_values_keeps_them_and_finds_the_nearest_level() -> None:
    knob = FloatKnob.at("ao_rays", [0.0, 0.0625, 0.125, 4.0, 4.25])
    assert knob.values.tolist() == [0.0, 0.0625, 0.125, 4.0, 4.25]
    assert knob.index(0.07) == 1 and knob.index(4.2) == 4
    assert knob.normalized(np.array([4.25]))[0] == 1.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: FloatKnob.at("ao_rays", [0.0, 0.5, 0.5]),
        lambda: FloatKnob.at("ao_rays", []),
        lambda: FloatKnob.at("ao_rays", [0.0, math.nan]),
        lambda: IntKnob("ao_rays", 5, 4),
        lambda: FloatKnob("ao_radius", 2.0, 1.0),
        lambda: FloatKnob("ao_radius", math.nan, 1.0),
        lambda: FloatKnob("ao_radius", 0.0, math.inf),
        lambda: IntKnob("ao_rays", 0, math.nan),
        lambda: IntKnob("ao_rays", 0, 8, step=0),
        lambda: FloatKnob("ao_radius", 0.0, 1.0, levels=0),
        lambda: BoolKnob("ao_rays", weight=-1.0),
    ],
)
def test_bad_knobs_raise_value_error_naming_the_knob(make) -> None:
    with pytest.raises(ValueError, match="ao_r"):
        make()


def test_duplicate_names_raise() -> None:
    with pytest.raises(ValueError, match="'shadows'"):
        KnobSpace([BoolKnob("shadows"), IntKnob("shadows", 0, 1)])


def test_empty_space_raises() -> None:
    with pytest.raises(ValueError):
        KnobSpace([])


def test_grid_enumerates_every_setting_in_order() -> None:
    space = KnobSpace([IntKnob("a", 0, 2), BoolKnob("b")])
    grid = space.grid()
    assert space.size == 6
    assert grid["a"].tolist() == [0, 0, 1, 1, 2, 2]
    assert grid["b"].tolist() == [False, True] * 3
    for i in range(space.size):
        assert space.index_of(space.at_index(i)) == i


def test_default_quality_is_weighted_normalized_level() -> None:
    space = KnobSpace([IntKnob("a", 0, 4, weight=2.0), BoolKnob("b", weight=0.5)])
    q = space.quality({"a": np.array([0, 2, 4]), "b": np.array([True, False, True])})
    assert np.allclose(q, [0.5, 1.0, 2.5])


def test_user_quality_function_is_used() -> None:
    space = KnobSpace([IntKnob("a", 0, 4)], quality=lambda c: -np.abs(c["a"] - 2.0))
    assert np.allclose(space.quality(space.grid()), [-2, -1, 0, -1, -2])


def test_lowest_gives_plain_python_values() -> None:
    space = KnobSpace([IntKnob("a", 3, 9), BoolKnob("b"), FloatKnob("c", 0.5, 1.0)])
    low = space.lowest()
    assert low == {"a": 3, "b": False, "c": 0.5}
    assert [type(v) for v in low.values()] == [int, bool, float]
