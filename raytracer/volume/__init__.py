"""Volume rendering library: volumes, transfer functions, k-d bricks, OpenCL ray casting.

The single-process part of the distributed sort-last renderer (compositing and the MPI frame
loop live beside it). Names are exported lazily, so ``import raytracer.volume.compositing``
on an MPI rank does not pay for OpenCL or numba until they are used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "VolumeError": "errors",
    "Volume": "volume_data",
    "load_volume": "volume_data",
    "shipped_volumes": "volume_data",
    "known_names": "volume_data",
    "parse_raw_name": "volume_formats",
    "marschner_lobb": "procedural",
    "marschner_lobb_value": "procedural",
    "large_field": "procedural",
    "TransferFunction": "transfer_function",
    "correct_opacity": "transfer_function",
    "preset": "transfer_function",
    "PRESETS": "transfer_function",
    "default_for": "transfer_function",
    "load_transfer_function": "transfer_function",
    "resolve_transfer_function": "transfer_function",
    "Brick": "partition",
    "Partition": "partition",
    "kd_partition": "partition",
    "whole_brick": "partition",
    "minmax_grid": "empty_space",
    "empty_blocks": "empty_space",
    "cost_grid": "empty_space",
    "Raycaster": "raycaster",
    "BrickImage": "raycaster",
    "render_reference": "cpu_reference",
    "composite_over": "blend",
    "over": "blend",
    "to_rgb8": "blend",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the defining module on first use of an exported name."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'raytracer.volume' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"raytracer.volume.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
