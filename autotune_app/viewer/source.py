"""What the viewer asks of a governed renderer: one adapter per renderer, one frame loop.

The window, input, overlay, recording and summary (``main_loop.Viewer``) are the same for every
renderer; an adapter (:class:`FrameSource`) renders a frame for a camera under the tuner and
says what to show of it. ``tracer_source`` adapts the ray tracer, ``volume_source`` the
distributed volume renderer. Nothing here imports OpenGL: MPI ranks other than 0 use the
volume adapter's module without ever loading a window library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from raytracer.camera import Camera

FINISHED, FAILED, INTERRUPTED = 0, 2, 130  # how a run ended: the exit status it gives


def on_off(flag: bool) -> str:
    """A switch as the overlay shows it."""
    return "on" if flag else "off"


@dataclass
class ViewFrame:
    """One governed frame as the viewer shows, records and summarizes it."""

    image: np.ndarray  # (H, W, 3|4) uint8, top row first
    measured: float  # seconds the user waited for the frame (what the tuner holds)
    predicted: float
    corrected: float  # predicted x the slow feedback's correction
    probe_seconds: float
    over_budget: bool
    knobs: str  # the overlay's line about the chosen knobs
    columns: dict[str, Any] = field(default_factory=dict)  # the renderer's frames.csv columns
    log: Any = None  # the renderer's per-frame log for :meth:`FrameSource.summary`


class FrameSource(Protocol):
    """A renderer governed by the tuner, as the viewer drives it."""

    label: str  # what is shown: the overlay's first word(s) and the summary's subject
    device: str  # where it renders (the summary's first line)
    home: Camera  # the first view; R returns to it
    extent: float  # the scene's size (diagonal): flying speed and nearest dolly distance
    fields: tuple[str, ...]  # the renderer's own frames.csv columns
    help: list[str]  # the renderer's own keys for the H list
    target_seconds: float  # the target frame time (the + / - keys set it)
    tuning: bool  # False: the knobs stay where they are (the T key)

    def set_controller(self, name: str) -> None: ...

    def key(self, key: int, mods: int) -> bool:
        """Handle one of the renderer's own key presses; False if it is not one."""

    def resize(self, width: int, height: int) -> None: ...

    def start(self, show: Callable[[str], None]) -> None:
        """Before the first frame (e.g. calibrate); ``show`` puts a line in the window."""

    def render(self, camera: Camera) -> ViewFrame: ...

    def finish(self, status: int) -> None:
        """After the last frame, or when the run fails (``status``: FINISHED, FAILED,
        INTERRUPTED)."""

    def summary(self, logs: list[Any]) -> tuple[dict[str, Any], str]:
        """Figures for run.json (tracking and mean knobs) and the summary's own last lines."""

    def run_info(self) -> dict[str, Any]:
        """What run.json says about the renderer (scene, device, ...)."""
