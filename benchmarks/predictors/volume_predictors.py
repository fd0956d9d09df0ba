"""The volume renderer's per-rank render time: a linear model vs LR, SVR, RF and the hybrid.

The linear model is that of the per-process analytical model (HemoCell study), compared on the
rows it is fitted on. One rank in this process (no mpiexec), so "per rank" is rank 0's
whole-volume render; frames at random knobs (sampling rate, image scale, termination threshold)
as ``TunedVolumeRenderer`` calibrates. Sets, as ``bench volume-tuned`` holds out:
**calibration** at random views off the orbit plane of the calibration volume
(``volume_calibration_views``), **validation** on the cluster study's orbit (Tkachev et al.,
"Prediction of Distributed Volume Visualization Performance to Support Render Hardware
Acquisition") of the same volume (views the fit never saw), **test** on the orbit of a
held-out volume. Measured: the render's CPU seconds (what the per-process model is fitted on).
Feature sets: ``model``, the linear model's own inputs (probe-estimated samples, skipped
positions and rays, rendered pixels, jumps over empty space), and ``model+knobs`` with the
three knobs beside them (each + 1 for log2).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.predictors.part_predictors import PartRows
from governed.volume.knobs import BEST, ERT, settings_of, volume_knob_space
from governed.volume.model_fit import CalibrationSample, core_cache_bytes, render_rows
from governed.volume.workload_probe import BlockGrid, brick_boxes, probe_workload
from models.volume_cost import RenderModel, streamed_share

PARTS = ("render",)
FEATURE_SETS = ("model", "model+knobs")


def rows(samples: Sequence[CalibrationSample], thresholds: np.ndarray) -> PartRows:
    """Rank 0's render rows: measured CPU seconds and both feature sets."""
    *inputs, seconds = render_rows(samples, 0, thresholds)
    model = np.column_stack(inputs) + 1.0
    knobs = np.array([[1.0 / s.settings.step, s.settings.image_scale, s.settings.ert_threshold]
                      for s in samples]) + 1.0
    return PartRows(PARTS, np.array(seconds)[:, None],
                    {"model": (model,), "model+knobs": (np.hstack([model, knobs]),)})


def linear_seconds(model: RenderModel, data: PartRows) -> np.ndarray:
    """(rows, 1) seconds of the per-process render model on the rows' own inputs."""
    samples, skipped, rays, pixels, jumps = (data.features["model"][0] - 1.0).T
    return model.predict(samples, skipped, rays, pixels, jumps=jumps)[:, None]


def fit_linear(data: PartRows) -> RenderModel:
    """The per-process render model fitted on the rows (``RenderModel.fit``: robust NNLS)."""
    samples, skipped, rays, pixels, jumps = (data.features["model"][0] - 1.0).T
    return RenderModel.fit(samples, skipped, rays, pixels, data.measured[:, 0], jumps=jumps)


def collect(renderer: Any, cameras: Sequence[Any], size: int, seed: int
            ) -> list[CalibrationSample]:
    """One frame per camera at random knobs (after one untimed warm-up frame at the best
    settings): the probe's workload and the frame's record."""
    rng = np.random.default_rng(seed)
    space = volume_knob_space()
    grid = BlockGrid.for_volume(renderer.volume, renderer.tf)
    boxes = brick_boxes(renderer.partition)
    streamed = streamed_share(grid.working_set_bytes(boxes), core_cache_bytes())
    thresholds = probe_thresholds()
    renderer.render_frame(cameras[0], size, size, BEST)
    out = []
    for cam in cameras:
        settings = settings_of(space.at_levels([int(rng.integers(len(k)))
                                                for k in space.knobs]))
        workload = probe_workload(grid, cam, size, size, boxes, thresholds)
        record = renderer.render_frame(cam, size, size, settings).record
        out.append(CalibrationSample(workload, settings, record, streamed))
    return out


def probe_thresholds() -> np.ndarray:
    """The termination thresholds the probe measures at (the tuned renderer's)."""
    return np.linspace(*ERT[:2], ERT[2])
