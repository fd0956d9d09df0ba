"""Camera controller math: orbit keeps distance, dolly approaches, fly moves, reset restores."""

import math

import numpy as np
import pytest

from autotune_app.viewer.controls import PITCH_LIMIT, CameraController
from raytracer.camera import Camera

HOME = Camera((3.0, 2.0, 4.0), (0.0, 1.0, 0.0), (0.0, 1.0, 0.0), 50.0)


def _close(a, b) -> bool:
    return np.allclose(np.asarray(a, float), np.asarray(b, float), atol=1e-9)


def test_starts_at_home_camera() -> None:
    cam = CameraController(HOME, 10.0).camera()
    assert _close(cam.eye, HOME.eye) and _close(cam.target, HOME.target)
    assert cam.fov_y == HOME.fov_y


def test_orbit_keeps_target_and_distance() -> None:
    c = CameraController(HOME, 10.0)
    before = np.linalg.norm(np.subtract(HOME.eye, HOME.target))
    c.orbit(120.0, -40.0)
    cam = c.camera()
    assert _close(cam.target, HOME.target)
    assert np.linalg.norm(np.subtract(cam.eye, cam.target)) == pytest.approx(before)
    assert not _close(cam.eye, HOME.eye)


def test_pitch_is_clamped_below_the_pole() -> None:
    c = CameraController(HOME, 10.0)
    c.orbit(0.0, 1e6)
    assert c.pitch == pytest.approx(PITCH_LIMIT)
    Camera.basis(c.camera(), 16, 9)  # still a valid view, no degenerate basis


def test_dolly_moves_towards_target_and_never_through_it() -> None:
    c = CameraController(HOME, 10.0)
    d0 = c.distance
    c.dolly(1)
    assert c.distance < d0
    c.dolly(-2)
    assert c.distance > d0
    c.dolly(1e4)
    assert c.distance > 0


def test_fly_moves_eye_and_target_together() -> None:
    c = CameraController(HOME, 10.0)
    eye0, target0 = c.eye.copy(), c.target.copy()
    c.fly(1.0, 0.0, 0.0, 1.0)
    delta_eye, delta_target = c.eye - eye0, c.target - target0
    assert _close(delta_eye, delta_target)
    view = (target0 - eye0) / np.linalg.norm(target0 - eye0)
    assert delta_target @ view == pytest.approx(np.linalg.norm(delta_target))
    assert np.linalg.norm(delta_target) == pytest.approx(0.25 * 10.0)
    c.fly(0.0, 1.0, 0.0, 1.0)
    assert abs((c.target - target0 - delta_target) @ view) < 1e-9  # strafing is sideways


def test_reset_restores_home() -> None:
    c = CameraController(HOME, 10.0)
    c.orbit(33.0, 12.0)
    c.dolly(3)
    c.fly(0.3, -1.0, 1.0, 0.5)
    c.reset()
    cam = c.camera()
    assert _close(cam.eye, HOME.eye) and _close(cam.target, HOME.target)


def test_non_y_up_camera() -> None:
    home = Camera((0.0, -5.0, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 45.0)
    c = CameraController(home, 1.0)
    assert _close(c.camera().eye, home.eye)
    c.orbit(90.0 / 0.3, 0.0)  # a quarter turn about z
    assert c.eye[2] == pytest.approx(0.0, abs=1e-9)
    assert math.hypot(c.eye[0], c.eye[1]) == pytest.approx(5.0)
