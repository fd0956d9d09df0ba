"""Camera controller for the viewer: orbit, fly, dolly and reset as pure math (no GL, no glfw)."""

from __future__ import annotations

import math

import numpy as np

from raytracer.camera import Camera

ORBIT_DEGREES_PER_PIXEL = 0.3
PITCH_LIMIT = math.radians(89.0)
DOLLY_FACTOR = 0.9  # distance multiplier per scroll step towards the target
FLY_SPEED = 0.25  # scene diagonals per second
MIN_DISTANCE = 1e-3  # in scene diagonals


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


class CameraController:
    """Orbits an eye around a target, flies both together, dollies the eye towards the target.

    The orbit angles are measured in a frame built from the home camera's ``up`` vector, so
    ``reset()`` returns exactly to the home camera and pitch never flips over the pole.
    """

    def __init__(self, home: Camera, scene_diagonal: float) -> None:
        self.home = home
        self.scale = float(scene_diagonal) if scene_diagonal > 0 else 1.0
        self.up = _unit(np.asarray(home.up, np.float64))
        helper = np.array([1.0, 0.0, 0.0]) if abs(self.up[0]) < 0.9 else np.array([0.0, 0.0, 1.0])
        self.axis_x = _unit(helper - self.up * (helper @ self.up))
        self.axis_z = np.cross(self.axis_x, self.up)
        self.reset()

    def reset(self) -> None:
        """Return to the home camera (the R key)."""
        self.target = np.asarray(self.home.target, np.float64)
        offset = np.asarray(self.home.eye, np.float64) - self.target
        self.distance = max(float(np.linalg.norm(offset)), MIN_DISTANCE * self.scale)
        d = offset / self.distance
        self.pitch = math.asin(max(-1.0, min(1.0, float(d @ self.up))))
        self.pitch = max(-PITCH_LIMIT, min(PITCH_LIMIT, self.pitch))
        self.yaw = math.atan2(float(d @ self.axis_z), float(d @ self.axis_x))

    @property
    def eye(self) -> np.ndarray:
        horizontal = math.cos(self.yaw) * self.axis_x + math.sin(self.yaw) * self.axis_z
        direction = math.cos(self.pitch) * horizontal + math.sin(self.pitch) * self.up
        return self.target + self.distance * direction

    def camera(self) -> Camera:
        """The current view as a (frozen) camera for the renderer."""
        return Camera(
            tuple(map(float, self.eye)),
            tuple(map(float, self.target)),
            tuple(map(float, self.up)),
            self.home.fov_y,
        )

    def orbit(self, dx_pixels: float, dy_pixels: float) -> None:
        """Rotate the eye around the target by a mouse drag of (dx, dy) pixels (y down)."""
        step = math.radians(ORBIT_DEGREES_PER_PIXEL)
        self.yaw += dx_pixels * step
        self.pitch = max(-PITCH_LIMIT, min(PITCH_LIMIT, self.pitch + dy_pixels * step))

    def dolly(self, steps: float) -> None:
        """Move the eye towards the target (positive steps, scroll up) or away from it."""
        self.distance = max(self.distance * DOLLY_FACTOR**steps, MIN_DISTANCE * self.scale)

    def fly(self, forward: float, right: float, up: float, seconds: float) -> None:
        """Translate eye and target together along the view axes; inputs are -1..1 per axis."""
        view = _unit(self.target - self.eye)
        side = _unit(np.cross(view, self.up))
        move = forward * view + right * side + up * self.up
        self.target = self.target + move * (FLY_SPEED * self.scale * seconds)
