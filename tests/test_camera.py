"""The pinhole camera's ray basis: where its rays point and how far apart pixels are."""

import math

import numpy as np
import pytest

from raytracer.camera import Camera, with_next


def _direction(basis: np.ndarray, x: float, y: float) -> np.ndarray:
    _, top_left, du, dv = basis.astype(np.float64)
    d = top_left + x * du + y * dv
    return d / np.linalg.norm(d)


@pytest.mark.parametrize("eye, target, up", [
    ((0.0, 0.0, 5.0), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
    ((3.0, -2.0, 1.0), (0.5, 0.25, -4.0), (0.0, 1.0, 0.0)),
    ((1.0, 1.0, 1.0), (2.0, 3.0, 4.0), (0.3, 0.2, 0.9)),
])
def test_centre_ray_hits_the_target_and_pixels_span_the_field_of_view(eye, target, up):
    width, height, fov = 320, 200, 50.0
    basis = Camera(eye, target, up, fov).basis(width, height)
    forward = np.subtract(target, eye) / np.linalg.norm(np.subtract(target, eye))
    np.testing.assert_allclose(basis[0], eye, rtol=1e-6)
    np.testing.assert_allclose(_direction(basis, width / 2, height / 2), forward, atol=1e-6)
    _, _, du, dv = basis.astype(np.float64)
    assert abs(du @ dv) < 1e-9 and abs(du @ forward) < 1e-6 and abs(dv @ forward) < 1e-6
    top, bottom = _direction(basis, width / 2, 0), _direction(basis, width / 2, height)
    assert math.degrees(math.acos(top @ bottom)) == pytest.approx(fov, rel=1e-5)
    assert np.linalg.norm(du) == pytest.approx(np.linalg.norm(dv), rel=1e-6)  # square pixels
    assert np.cross(du, -dv) @ forward < 0  # right-handed: right x up points back at the eye


def test_up_along_the_view_still_gives_a_basis():
    basis = Camera((0.0, 5.0, 0.0), (0.0, 0.0, 0.0), (0.0, 1.0, 0.0)).basis(16, 16)
    assert np.all(np.isfinite(basis))
    np.testing.assert_allclose(_direction(basis, 8, 8), (0.0, -1.0, 0.0), atol=1e-6)


def test_eye_on_the_target_is_refused():
    with pytest.raises(ValueError, match="must differ"):
        Camera((1.0, 2.0, 3.0), (1.0, 2.0, 3.0)).basis(8, 8)


def test_each_view_of_a_path_comes_with_the_next_and_the_last_with_none():
    path = [Camera((float(i), 0.0, 5.0), (0.0, 0.0, 0.0)) for i in range(3)]
    assert list(with_next(path)) == [(path[0], path[1]), (path[1], path[2]), (path[2], None)]
    assert list(with_next([])) == []
