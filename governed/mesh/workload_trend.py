"""How a view's workload drifts between probes on a smooth camera path.

Between two probes the governed ray tracer prices every frame from the last probe's workload.
On a smooth path (an orbit, a dolly) that workload grows or shrinks a little every frame, and a
stale price is off by all the drift since the probe. Successive probes measure that drift; the
last probe's prices are carried along it, so the probe is needed only where the carried prices
stop holding (what the drift schedule of :mod:`governed.mesh.probe_policy` then measures).
Pure arithmetic on predicted frame seconds; it measures nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_PER_FRAME = 0.05  # a faster change between probes is a cut, not a drift: it is not carried


@dataclass
class WorkloadTrend:
    """The relative change of the predicted frame per frame between the last two probes, and
    the frames rendered since the last one.

    ``scatter``: how far two probes of one view differ by sampling alone; a change within it
    is carried as no drift (a noisy rate carried over many frames would do more harm than
    none).
    """

    scatter: float = 0.02
    per_frame: float = 0.0
    frames: int = 0

    def factor(self) -> float:
        """What the last probe's prices are multiplied by on the current frame."""
        return (1.0 + self.per_frame) ** self.frames

    def step(self) -> None:
        """The current frame is priced from the last probe again (one frame further on)."""
        self.frames += 1

    def probed(self, before: float | None, after: float) -> float | None:
        """A new probe prices the frame at ``after`` seconds where the last probe's workload
        priced the same setting at ``before`` (not carried; None: no comparable probe). Returns
        the relative change the carried price missed (None without a comparable probe), and
        takes the new rate."""
        frames, carried = self.frames + 1, before
        self.frames = 0
        if before is None or before <= 0 or after <= 0:
            self.per_frame = 0.0
            return None
        carried = before * (1.0 + self.per_frame) ** frames
        change = after / before - 1.0
        beyond = max(0.0, abs(change) - self.scatter) / frames
        self.per_frame = 0.0 if beyond > MAX_PER_FRAME else (beyond if change > 0 else -beyond)
        return abs(after / carried - 1.0)
