"""Transfer functions: lookup tables, presets, JSON files and the opacity correction."""

from __future__ import annotations

import json

import numpy as np
import pytest

from raytracer.volume import (
    PRESETS,
    TransferFunction,
    VolumeError,
    correct_opacity,
    default_for,
    load_transfer_function,
    preset,
    resolve_transfer_function,
    shipped_volumes,
)


def test_lut_interpolates_control_points():
    tf = TransferFunction([(0, 0, 0, 0), (1, 1, 0.5, 0)], [(0, 0), (0.5, 0), (1, 0.8)])
    lut = tf.lut(5)
    assert lut.shape == (5, 4) and lut.dtype == np.float32
    np.testing.assert_allclose(lut[:, 0], [0, 0.25, 0.5, 0.75, 1])
    np.testing.assert_allclose(lut[:, 1], [0, 0.125, 0.25, 0.375, 0.5])
    np.testing.assert_allclose(lut[:, 3], [0, 0, 0, 0.4, 0.8])
    np.testing.assert_allclose(tf.evaluate([-1.0, 2.0]), [[0, 0, 0, 0], [1, 0.5, 0, 0.8]])


def test_opacity_correction_formula():
    a = np.array([0.0, 0.1, 0.5, 0.99, 1.0])
    np.testing.assert_allclose(correct_opacity(a, 1.0, 1.0), a)
    np.testing.assert_allclose(correct_opacity(a, 2.0, 1.0), 1 - (1 - a) ** 2)
    np.testing.assert_allclose(correct_opacity(a, 0.25, 0.5), 1 - (1 - a) ** 0.5)
    # two half steps absorb exactly what one full step does
    half = correct_opacity(a, 0.5)
    np.testing.assert_allclose(1 - (1 - half) ** 2, a, atol=1e-12)
    tf = TransferFunction([(0, 1, 1, 1), (1, 1, 1, 1)], [(0, 0.2), (1, 0.2)], reference_step=0.5)
    np.testing.assert_allclose(tf.lut(4, step=1.0)[:, 3], 1 - 0.8 ** 2, rtol=1e-6)
    np.testing.assert_allclose(tf.lut(4)[:, 3], 0.2)
    with pytest.raises(VolumeError, match="step"):
        tf.lut(4, step=0.0)


def test_presets_are_valid_and_cover_the_shipped_volumes():
    for name in ("grey", "ct", "bone", "fire"):
        assert preset(name).name == name
    for name in (*shipped_volumes(), "marschner-lobb", "field"):
        assert default_for(name).name == name
    assert default_for("field:512").name == "field"
    assert default_for("my_scan").name == "grey"
    for tf in PRESETS.values():
        lut = tf.lut()
        assert lut[:, 3].max() > 0 and lut.min() >= 0 and lut.max() <= 1
    with pytest.raises(VolumeError, match="unknown transfer function 'nope'.*grey"):
        preset("nope")


def test_json_round_trip_and_resolution(tmp_path):
    tf = preset("fire")
    path = tmp_path / "fire.json"
    path.write_text(json.dumps(tf.to_dict()))
    loaded = load_transfer_function(path)
    np.testing.assert_array_equal(loaded.lut(), tf.lut())
    assert resolve_transfer_function(str(path)).name == "fire"
    assert resolve_transfer_function("bone").name == "bone"
    assert resolve_transfer_function(None, "bonsai").name == "bonsai"
    assert resolve_transfer_function(tf) is tf


@pytest.mark.parametrize("content,message", [
    ("{not json", "not a JSON transfer function"),
    ("[1, 2]", "must be a JSON object"),
    ('{"opacities": [[0, 1]]}', "missing key 'colors'"),
    ('{"colors": [[0, 1, 1, 1]]}', "missing key 'opacities'"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": [[0, 1]], "gamma": 2}', "unknown key"),
    ('{"colors": [[0, 1, 1]], "opacities": [[0, 1]]}', "colors\\[0\\] has 3 numbers"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": [[0, 1.5]]}', "opacities\\[0\\]"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": [[0.5, 1], [0.2, 1]]}', "non-decreasing"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": []}', "opacities has no control points"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": [[0, 0], [1, 0]]}', "no opacity anywhere"),
    ('{"colors": "red", "opacities": [[0, 1]]}', "colors must be a list"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": [[0, 1]], "reference_step": "x"}',
     "'reference_step' must be a number"),
    ('{"colors": [[0, 1, 1, 1]], "opacities": [[0, 1]], "reference_step": -1}',
     "reference_step must be positive"),
])
def test_json_errors_name_the_file_and_key(tmp_path, content, message):
    path = tmp_path / "tf.json"
    path.write_text(content)
    with pytest.raises(VolumeError, match=message) as info:
        load_transfer_function(path)
    assert str(path) in str(info.value)


def test_missing_file_and_no_opacity_in_code():
    with pytest.raises(VolumeError, match="missing.json: transfer function file not found"):
        resolve_transfer_function("missing.json")
    with pytest.raises(VolumeError, match="no opacity anywhere"):
        TransferFunction([(0, 1, 1, 1)], [(0, 0), (1, 0)])
