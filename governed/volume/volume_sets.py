"""Which volume is for what: calibration, validation or test, fixed in advance; every benchmark
of the volume renderer reads its volumes here.

The rule, as for the ray tracer's scenes (:mod:`governed.mesh.scene_sets`): the per-rank model
is fitted on the calibration volumes; model, controller and launch-shape choices are made by
their figures on the validation volumes (the caster's launch is timed on
``raytracer.volume.raycaster.LAUNCH_VOLUME``, one of them); the test volumes are touched only
to report (a choice made by a test figure makes that volume a validation one, and a new test
volume must then be found).

The caster builds one kernel variant for 8-bit volumes (byte cells) and one for every other
voxel type (16-bit integers and floats, read as float cells). Validation and test hold both;
the calibration holds byte cells only: bonsai (the governed volume) and ironprot (68³: a working
set that fits a core's cache, where bonsai's does not). Calibrating float cells too (the
Marschner-Lobb signal, or bonsai and ironprot widened to 16-bit voxels, with render models per
variant) did not price the float validation volume better (docs/tried-and-not-kept.md).
Validation: two 8-bit scans and a float blob field. Test: an 8-bit scan and a 16-bit CT (float
cells), neither seen by any choice.
"""

from __future__ import annotations

GOVERNED_VOLUME = "bonsai"  # the volume the benchmarks govern; the first calibration volume
CALIBRATION_VOLUMES: tuple[str, ...] = (GOVERNED_VOLUME, "ironprot")
VALIDATION_VOLUMES: tuple[str, ...] = ("aneurism", "neghip", "field:96")
TEST_VOLUMES: tuple[str, ...] = ("tooth", "headsq")


def volume_sets() -> dict[str, list[str]]:
    """Every set's volumes, for a benchmark's JSON."""
    return {"calibration": list(CALIBRATION_VOLUMES), "validation": list(VALIDATION_VOLUMES),
            "test": list(TEST_VOLUMES)}


def set_of(volume: str) -> str | None:
    """The set a volume belongs to; None for a volume of none (a user's file)."""
    return next((name for name, volumes in volume_sets().items() if volume in volumes), None)
