"""tools/gpu_refit.py re-fits the model on a GPU check's recorded frames without a GPU: on the
H200's committed frames it gives the held-out error the check itself reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
H200 = ROOT / "results" / "nvidia-h200" / "gpu"
sys.path.insert(0, str(ROOT / "tools"))

import gpu_refit  # noqa: E402  (a tool beside the packages, not an installed module)


@pytest.mark.skipif(not H200.is_dir(), reason="no committed H200 results")
def test_the_recorded_frames_give_the_checks_own_heldout_error():
    recorded = gpu_refit.Recorded.read(H200)
    reported = json.loads((H200 / "results.json").read_text())["steps"]
    assert len(recorded.calibration) == reported["calibration"]["fit"]["frames"]
    assert len(recorded.heldout) == reported["heldout"]["frames"]
    counts = gpu_refit.recorded_counts(H200, None, "kernel_counts.json")
    variant = gpu_refit.fit_variant(recorded, counts, recorded.occupancy)
    assert variant["heldout_frame_mean"] == pytest.approx(
        reported["heldout"]["errors"]["frame"]["mean"], rel=1e-6)
    assert variant["in_sample_frame_mean"] == pytest.approx(
        reported["calibration"]["fit"]["in_sample_mean_frame_error"], rel=1e-6)


def test_a_recorded_frame_round_trips():
    from governed.mesh.calibration_frames import Sample

    frame = json.loads((H200 / "heldout_frames.json").read_text())[0]
    assert Sample.from_dict(frame).to_dict() == frame
