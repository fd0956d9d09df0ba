"""When a governed renderer probes the coming view, and when the last probe stands in.

The ray tracer's probe traces a sample of the view, the volume renderer's marches a few
thousand rays through the bricks; both run on the CPU, and on a CPU device on the cores that
render, so every probe is time the frame does not spend rendering. Three policies:

- ``always``: every frame is probed (the design of Ganestam & Doggett, "Auto-tuning
  Interactive Ray Tracing using an Analytical GPU Architecture Model", where the probe hides
  behind the GPU's previous frame);
- ``on-change``: a view is probed when the last probe cannot stand in for it: the first view,
  a jump of the camera (a cut or a fast turn), a frame the model mispriced on an older probe's
  workload, or a probe that has grown old. How old it may grow adapts to how fast the workload
  drifts: successive probes give the drift of the predicted frame per frame (beyond the
  probe's own scatter), and the next probe comes when the drift since the last one would reach
  ``drift``;
- ``never``: only the first view is probed (and again after a resize); feedback does the rest.

This module decides; it measures nothing (the renderer probes and reports what it saw).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from raytracer.camera import Camera

PROBE_POLICIES = ("always", "on-change", "never")
DEFAULT_PROBE_POLICY = "on-change"


@dataclass
class ProbeSchedule:
    """Which frames a policy probes.

    ``jump_degrees`` / ``jump_move``: a camera that turned or moved more than this from one
    frame to the next (its view direction, its eye as a share of the scene's diagonal) is a
    cut: a new view. A slow path's change accumulates in the drift instead.
    ``drift``: the change of the predicted frame allowed between probes (the slow feedback
    takes what is left); ``scatter``: how far two probes of one view may differ by sampling
    alone (a change within it is no drift); the interval is at most ``max_interval`` frames.
    ``mispriced``: a frame whose corrected prediction missed its measured time by more than
    this share makes the next new view probe, unless that frame was itself probed: then the
    workload was fresh, the miss is the model's (or noise), and the feedback takes it.
    """

    policy: str = DEFAULT_PROBE_POLICY
    jump_degrees: float = 20.0
    jump_move: float = 0.1
    drift: float = 0.03
    scatter: float = 0.02
    max_interval: int = 16
    mispriced: float = 0.10
    interval: int = field(default=1, init=False)
    _since: int = field(default=0, init=False)
    _camera: Camera | None = field(default=None, init=False)  # the last probed view
    _last: Camera | None = field(default=None, init=False)  # the last frame's view
    _restart: bool = field(default=True, init=False)
    _mispriced: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.policy not in PROBE_POLICIES:
            raise ValueError(f"probe policy must be one of {', '.join(PROBE_POLICIES)}, "
                             f"got {self.policy!r}")

    @property
    def last_probed(self) -> Camera | None:
        """The view of the last probe (None before the first): a frame of this view is priced
        on its own workload."""
        return self._camera

    def due(self, camera: Camera, diagonal: float, learning: bool = False) -> bool:
        """Whether the frame of ``camera`` must be probed (call once per frame); ``learning``:
        the renderer's model learns only from frames rendered on their own probe and is still
        learning (``on-change`` then probes every new view)."""
        last, self._last = self._last, camera
        if self._restart or self.policy == "always":
            return True
        if self.policy == "never" or camera == self._camera:  # the probe is deterministic
            return False
        self._since += 1
        return (learning or self._mispriced or self._since >= self.interval
                or view_change(last or self._camera, camera, diagonal, self.jump_degrees,
                               self.jump_move) > 1.0)

    def probed(self, camera: Camera, change: float | None) -> None:
        """A probe of ``camera`` was taken; ``change`` is how much its predicted frame differs
        from the last probe's (relative; None for the first)."""
        if change is None:
            self.interval = 1
        else:
            per_frame = max(0.0, change - self.scatter) / max(self._since, 1)
            self.interval = max(1, min(self.max_interval,
                                       int(self.drift / max(per_frame, 1e-12))))
        self._camera, self._since = camera, 0
        self._restart = self._mispriced = False

    def observed(self, corrected: float, measured: float) -> None:
        """A rendered frame's corrected prediction against its measured time: a frame the
        model mispriced on an older probe's workload makes the next new view probe
        (``on-change`` only)."""
        fresh = self._camera is not None and self._camera == self._last
        if (self.policy == "on-change" and not fresh and measured > 0
                and math.isfinite(corrected)
                and abs(corrected - measured) / measured > self.mispriced):
            self._mispriced = True

    def restart(self) -> None:
        """Probe the next frame whatever the policy (the first after a resize, a new AO radius,
        or a controller that starts pricing frames again)."""
        self._restart, self.interval = True, 1


def view_change(a: Camera, b: Camera, diagonal: float, degrees: float, move: float) -> float:
    """How far camera ``b`` is from ``a``, as a multiple of the larger allowance: its view
    direction turned by ``degrees``, or its eye moved by ``move`` of ``diagonal``. Plain
    arithmetic: asked every frame, where a generator's frames cost more than the sums."""
    (ax, ay, az), (bx, by, bz) = a.eye, b.eye
    (tx, ty, tz), (ux, uy, uz) = a.target, b.target
    dax, day, daz = tx - ax, ty - ay, tz - az
    dbx, dby, dbz = ux - bx, uy - by, uz - bz
    cos = (dax * dbx + day * dby + daz * dbz) / max(
        math.hypot(dax, day, daz) * math.hypot(dbx, dby, dbz), 1e-30)
    turned = math.degrees(math.acos(max(-1.0, min(1.0, cos))))
    moved = math.hypot(bx - ax, by - ay, bz - az) / max(diagonal, 1e-30)
    return max(turned / degrees, moved / move)
