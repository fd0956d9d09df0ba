"""Frame times found by rendering, not by the model: the baselines the governed renderer meets.

The best setting under the target on a view, by measurement (the fixed baseline's on its first
view, the oracle's on each), the full-quality frame time a target is set from, and repeated
frames of one view (the machine's frame-to-frame noise). All render through the shared-frame
protocol (:class:`~governed.volume.frame_sharing.SharedFrames`), so they are collective.
"""

from __future__ import annotations

import numpy as np

from autotune.baselines import bisect_by_measurement
from governed.volume.frame_sharing import SharedFrames
from governed.volume.knobs import BEST, QualityLosses, settings_of, volume_knob_space
from raytracer.camera import Camera
from raytracer.volume.distributed import FrameSettings
from raytracer.volume.frame_sync import DONE


def repeated_frame_seconds(frames: SharedFrames, camera: Camera, settings: FrameSettings,
                           count: int) -> list[float] | None:
    """Rank 0's frame times of ``count`` renders of one view at fixed ``settings`` (what the
    machine's frame-to-frame noise alone does); None on the other ranks (collective)."""
    times = []
    for _ in range(count):
        _, res = frames.shared_frame(camera, settings if frames.rank == 0 else None)
        if frames.rank == 0:
            times.append(res.record.frame_seconds)
    return times if frames.rank == 0 else None


def full_quality_seconds(frames: SharedFrames, camera: Camera, warmup: int, repeats: int
                         ) -> float | None:
    """Rank 0's frame time at the best settings on ``camera``: the median of ``repeats``
    frames after ``warmup``; None on the other ranks (collective)."""
    times = repeated_frame_seconds(frames, camera, BEST, warmup + repeats)
    return float(np.median(times[warmup:])) if times is not None else None


def best_setting_by_measurement(frames: SharedFrames, camera: Camera,
                                losses: QualityLosses | None, repeats: int = 3
                                ) -> FrameSettings:
    """The best-looking setting whose median of ``repeats`` frames of ``camera`` fits the
    target, found by rendering: the fixed baseline's setting on its first view, and the
    oracle's on each view. A frame costs more at a higher sampling rate, whatever the scale and
    threshold, so the rate is bisected (single frames) for each pair of those; each pair's
    best rate is then measured ``repeats`` times, and the best-looking one whose median fits
    wins (the cheapest measured if none does). The quality order alone is no cost order: a
    bisection along it stopped on settings 20-60 % under the target. Rank 0 searches, shares
    each trial frame and then the setting found (with DONE); the others render the trials and
    return that setting (collective)."""
    if frames.rank != 0:
        return frames.follow_until_done().settings
    space = volume_knob_space(losses)
    grid = space.grid()
    quality = space.quality(grid)
    target = frames.target_seconds

    def seconds(index: int, count: int) -> float:
        settings = settings_of({k: v[index] for k, v in grid.items()})
        return float(np.median([frames.shared_frame(camera, settings)[1].record.frame_seconds
                                for _ in range(count)]))

    pairs = np.unique(np.column_stack([grid["image_scale"], grid["ert_threshold"]]), axis=0)
    tried: list[tuple[float, float, int]] = []  # (confirmed median, quality, grid index)
    for scale, ert in pairs:
        rates = np.flatnonzero((grid["image_scale"] == scale) & (grid["ert_threshold"] == ert))
        rates = rates[np.argsort(grid["sampling_rate"][rates])]
        found = bisect_by_measurement(len(rates), lambda i, r=rates: seconds(int(r[i]), 1),
                                      target, tolerance=0.0, iterations=len(rates).bit_length())
        index = int(rates[found.index])
        tried.append((seconds(index, repeats), float(quality[index]), index))
    fitting = [t for t in tried if t[0] <= target]
    best = max(fitting, key=lambda t: t[1]) if fitting else min(tried)
    settings = settings_of({k: v[best[2]] for k, v in grid.items()})
    frames.sync.share(frames.state(DONE, settings=settings))
    return settings
