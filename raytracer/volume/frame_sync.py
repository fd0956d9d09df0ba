"""Rank 0 drives, the others follow: one broadcast of the frame's state per frame.

In the spirit of VTK's ``vtkSynchronizedRenderers``: before every collective step rank 0
packs what the step needs (what to do, the camera, the target, the knobs, the image size,
the controller and tuning switch of the tuning glue, an exit status) into one fixed-layout
float64 vector and broadcasts it; every other rank restores it and does the same step.
Every application (the ``autotune volume`` command, the viewer, the benchmarks) goes through
this one protocol, so a setting changed on rank 0 applies on every rank from the same frame.

Only plain numbers travel: the controller is an index into a table the tuning glue owns.
A rank that waits between frames (while rank 0 draws or waits for input) polls the
non-blocking broadcast and sleeps in between instead of spinning a core; inside a collective
block it just waits, unless ranks share cores: then it sleeps between shorter polls.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raytracer.camera import Camera
from raytracer.volume.distributed import FrameSettings

# What a state asks every rank to do.
FRAME = 0  # render one frame at the state's camera, size and knobs
CALIBRATE = 1  # calibrate the model (the tuning glue's collective calibration)
DONE = 2  # rank 0 ends a sequence of frames it drove (e.g. a search by measurement)
QUIT = 3  # end the run with ``status``

POLL_SECONDS = 0.001  # how often a rank waiting between frames looks for the next state
#: how often a rank that shares its core looks for the next state inside a block of frames
CORE_SHARING_POLL_SECONDS = 1e-4

# The layout: every slot's name and width, in order (a camera takes 10 numbers).
_WIDTHS = {"op": 1, "eye": 3, "look_at": 3, "up": 3, "fov_y": 1, "target": 1, "knobs": 3,
           "width": 1, "height": 1, "controller": 1, "tuning": 1, "status": 1}
_OFFSETS = np.cumsum([0, *_WIDTHS.values()])
_SLOT = {name: slice(int(a), int(b))
         for name, a, b in zip(_WIDTHS, _OFFSETS[:-1], _OFFSETS[1:], strict=True)}
SIZE = int(_OFFSETS[-1])  # float64 numbers in one packed state
_CAMERA = slice(_SLOT["eye"].start, _SLOT["fov_y"].stop)


@dataclass(frozen=True)
class FrameState:
    """Everything a rank needs for one collective step, as rank 0 decided it."""

    op: int = FRAME
    camera: Camera | None = None  # None: the step needs no camera (CALIBRATE, DONE, QUIT)
    target: float = 0.0  # the target frame time, seconds
    settings: FrameSettings = field(default_factory=FrameSettings)  # the knobs
    width: int = 1
    height: int = 1
    controller: int = 0  # index into the tuning glue's controller table
    tuning: bool = True  # False: the knobs are held where they are
    status: int = 0  # with QUIT: the exit status every rank returns

    def pack(self) -> np.ndarray:
        """The state as one float64 vector of :data:`SIZE` numbers."""
        v = np.zeros(SIZE, np.float64)
        c, s = self.camera, self.settings
        if c is None:
            v[_CAMERA] = math.nan
        else:
            v[_SLOT["eye"]], v[_SLOT["look_at"]], v[_SLOT["up"]] = c.eye, c.target, c.up
            v[_SLOT["fov_y"]] = c.fov_y
        v[_SLOT["knobs"]] = (s.step, s.image_scale, s.ert_threshold)
        for name in ("op", "target", "width", "height", "controller", "tuning", "status"):
            v[_SLOT[name]] = getattr(self, name)
        return v

    @classmethod
    def unpack(cls, v: np.ndarray) -> FrameState:
        """The state :meth:`pack` wrote into ``v``."""

        def triple(name: str) -> tuple[float, float, float]:
            x, y, z = (float(a) for a in v[_SLOT[name]])
            return (x, y, z)

        def one(name: str) -> float:
            return float(v[_SLOT[name].start])

        camera = None
        if not math.isnan(one("fov_y")):
            camera = Camera(triple("eye"), triple("look_at"), triple("up"), one("fov_y"))
        return cls(int(one("op")), camera, one("target"), FrameSettings(*triple("knobs")),
                   int(one("width")), int(one("height")), int(one("controller")),
                   bool(one("tuning")), int(one("status")))


class FrameSync:
    """The one channel from rank 0 to every rank of ``comm``: :meth:`share` per step."""

    def __init__(self, comm: Any, poll_seconds: float = POLL_SECONDS,
                 shares_core: bool = False) -> None:
        self.comm, self.poll_seconds = comm, poll_seconds
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        # ranks share cores (more ranks than cores): a waiting rank sleeps between polls
        # even inside a block, or its spin takes the core from the rank beside it (4 ranks
        # on 2 cores: rank 0's search 0.67 -> 0.31 ms a frame)
        self.shares_core = shares_core

    def share(self, state: FrameState | None, idle: bool = False) -> FrameState:
        """Collective: rank 0 passes its state and gets it back, the others pass None and
        get rank 0's. ``idle``: this rank waits between frames, so it sleeps while polling."""
        if self.size == 1:
            if state is None:
                raise ValueError("rank 0 must give the state to share")
            return state
        buf = state.pack() if self.rank == 0 else np.empty(SIZE, np.float64)
        request = self.comm.Ibcast(buf, root=0)
        if self.rank != 0 and (idle or self.shares_core):
            pause = self.poll_seconds if idle else CORE_SHARING_POLL_SECONDS
            while not request.Test():
                time.sleep(pause)
        else:
            request.Wait()
        return state if self.rank == 0 else FrameState.unpack(buf)

    def receive(self) -> FrameState:
        """Ranks >= 1 between frames: wait (sleeping) for rank 0's next state."""
        return self.share(None, idle=True)
