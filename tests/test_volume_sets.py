"""The volume renderer's calibration / validation / test split (issue 51, item 1): one file
names the sets, the sets are disjoint, validation and test cover both of the caster's kernel
variants, and the caster's launch is chosen on a validation volume."""

from __future__ import annotations

from governed.volume.volume_sets import (
    CALIBRATION_VOLUMES,
    GOVERNED_VOLUME,
    TEST_VOLUMES,
    VALIDATION_VOLUMES,
    set_of,
    volume_sets,
)
from raytracer.volume.raycaster import LAUNCH_VOLUME
from raytracer.volume.volume_data import load_volume, shipped_volumes


def test_sets_are_disjoint_and_every_shipped_volume_is_in_one():
    listed = [v for volumes in volume_sets().values() for v in volumes]
    assert len(listed) == len(set(listed))
    assert set(shipped_volumes()) <= set(listed)
    assert CALIBRATION_VOLUMES[0] == GOVERNED_VOLUME
    assert set_of("tooth") == "test" and set_of("my_scan.nrrd") is None


def test_validation_and_test_cover_both_kernel_variants():
    """Byte cells (8-bit voxels) and float cells (every other type) in validation and test, so
    a choice is judged, and a model reported, on both of the caster's variants."""
    def variants(names):
        return {load_volume(n).byte_levels is not None for n in names}

    for names in (VALIDATION_VOLUMES, TEST_VOLUMES):
        assert variants(names) == {True, False}, names


def test_launch_shapes_are_chosen_on_a_validation_volume():
    assert LAUNCH_VOLUME in VALIDATION_VOLUMES
