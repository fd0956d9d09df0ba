"""Rank 0 drives a governed volume renderer, the other ranks follow: the frame protocol.

Every collective step of :class:`~governed.volume.tuned_volume.TunedVolumeRenderer` starts
with one :class:`~raytracer.volume.frame_sync.FrameSync` broadcast of rank 0's state (camera,
target, knobs, size, controller, tuning); the other ranks restore it and render the same
frame. :class:`SharedFrames` is that protocol, the base of the governed renderer; the
measurements that render frames by it (``quality_measures``, ``measured_baselines``,
``calibration``) take one.
"""

from __future__ import annotations

from autotune import CONTROLLERS, FrameLoop, Governed
from governed.volume.knobs import BEST
from raytracer.camera import Camera
from raytracer.volume.distributed import DistributedRenderer, FrameResult, FrameSettings
from raytracer.volume.frame_sync import DONE, FRAME, FrameState, FrameSync

CONTROLLER_NAMES = tuple(CONTROLLERS)  # what a shared frame state's controller index names


class SharedFrames(Governed):
    """A :class:`DistributedRenderer` whose frames rank 0 decides and every rank renders
    (call every method on every rank: they are collective). ``loop`` holds the target,
    controller and tuning switch that travel with each frame's state."""

    def __init__(self, renderer: DistributedRenderer, width: int, height: int,
                 loop: FrameLoop) -> None:
        self.renderer = renderer
        self.comm = renderer.comm
        self.rank = renderer.rank
        self.sync = FrameSync(self.comm, shares_core=renderer.node.oversubscribed)
        self.width, self.height = width, height
        self.loop = loop

    def state(self, op: int, camera: Camera | None = None,
              settings: FrameSettings | None = None, status: int = 0) -> FrameState:
        """Rank 0: this renderer's state for one collective step (what :meth:`follow` and
        the other ranks restore)."""
        return FrameState(op, camera, self.target_seconds, settings or BEST, self.width,
                          self.height, CONTROLLER_NAMES.index(self.controller), self.tuning,
                          status)

    def restore(self, state: FrameState) -> None:
        """Ranks >= 1: take rank 0's target, size, controller and tuning switch."""
        self.loop.target_seconds = state.target
        if (state.width, state.height) != (self.width, self.height):
            self.resize(state.width, state.height)
        if CONTROLLER_NAMES[state.controller] != self.controller:
            self.loop.use_controller(CONTROLLER_NAMES[state.controller])
        self.loop.tuning = state.tuning

    def resize(self, width: int, height: int) -> None:
        """Render at another display size from the next frame on (rank 0 decides; the others
        follow with the next frame's state)."""
        self.width, self.height = width, height

    def follow(self, state: FrameState) -> FrameResult:
        """Ranks >= 1: render the frame rank 0 shared (collective with rank 0's frame)."""
        self.restore(state)
        return self.renderer.render_frame(state.camera, self.width, self.height,
                                          state.settings)

    def shared_frame(self, camera: Camera, settings: FrameSettings | None
                     ) -> tuple[FrameSettings, FrameResult]:
        """One frame at rank 0's ``settings`` (None on the others), shared as one state; the
        settings it was rendered at and its result, on every rank."""
        if self.rank == 0:
            self.sync.share(self.state(FRAME, camera, settings))
            return settings, self.renderer.render_frame(camera, self.width, self.height,
                                                        settings)
        state = self.sync.share(None)
        return state.settings, self.follow(state)

    def follow_until_done(self) -> FrameState:
        """Ranks >= 1: render the frames rank 0 drives until it shares DONE; that state."""
        while (state := self.sync.share(None)).op != DONE:
            self.follow(state)
        return state
