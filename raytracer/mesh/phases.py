"""The tracer's render phases (a kernel launch each; the AO phase's filter is a second), the
work-group tile they launch with and the pixels one SIMD group of a work-group covers (the
tracer's and the volume caster's).

One registry shared by the OpenCL host, the CPU probe, the cost model's glue, calibration and
the viewer, so a phase is named in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

TILE = 8  # a work-group is TILE x TILE pixels (the model's threads per block = 64)
#: the packet forms of the primary and shadow kernels (kernels/primary_packet.cl,
#: kernels/shadow_packet.cl): pixels (columns, rows) one work-item traces in float8 lanes
RAY_PACKET = (4, 2)
PACKET_PHASES = ("primary", "shadow")  # the phases whose kernels have a packet form


def simd_lanes(width: int, group: tuple[int, int]) -> tuple[int, int]:
    """Pixels (rows, columns) of one SIMD group of ``width`` lanes inside a work-group
    ``group`` (x, y): lanes run along x first (one pixel where work-items run alone)."""
    cols = max(1, min(width, group[0]))
    return max(1, min(group[1], width // cols)), cols


@dataclass(frozen=True)
class Phase:
    """One kernel launch of a frame: its name, its kernel and the setting that turns it on."""

    name: str
    kernel: str
    enabled_by: str | None  # RenderSettings field that switches the phase on; None = always
    traces_rays: bool  # walks the BVH (has traversal counters)


PHASE_LIST = (
    Phase("primary", "primary", None, True),
    Phase("shadow", "shadow", "shadows", True),
    Phase("ao", "ao", "ao_rays", True),
    Phase("shade", "shade", None, False),
)
PHASES = tuple(p.name for p in PHASE_LIST)
TRACING_PHASES = tuple(p.name for p in PHASE_LIST if p.traces_rays)
