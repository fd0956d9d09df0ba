"""Frame times found by rendering, not by the model: the baselines the governed renderer meets.

The fixed baseline's setting (bisection by measurement along the quality-ranked settings), the
oracle's setting on a view (the same bisection on medians of frames), the full-quality frame
time a target is set from, and repeated frames of one view (the machine's frame-to-frame
noise). All render through the shared-frame protocol
(:class:`~governed.volume.frame_sharing.SharedFrames`), so they are collective.
"""

from __future__ import annotations

import numpy as np

from autotune.baselines import bisect_by_measurement, quality_order
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


def fixed_setting_by_measurement(frames: SharedFrames, camera: Camera,
                                 losses: QualityLosses | None, iterations: int
                                 ) -> FrameSettings:
    """The fixed baseline's setting: bisection along the settings ranked by ``losses``
    (:func:`autotune.baselines.quality_order`) by rendering ``camera`` until its frame time is
    within 1 % of the target. Rank 0 runs the search, shares each trial frame and then the
    setting found (with DONE); the others render the trials and return that setting
    (collective)."""
    return _bisected(frames, camera, losses, iterations, repeats=1)


def best_setting_by_measurement(frames: SharedFrames, camera: Camera,
                                losses: QualityLosses | None, repeats: int = 3
                                ) -> FrameSettings:
    """The oracle's setting on one view: the best-looking one whose median of ``repeats``
    frames fits the target, by bisection along the same ranked settings as the fixed
    baseline's (collective, as :func:`fixed_setting_by_measurement`)."""
    return _bisected(frames, camera, losses, iterations=16, repeats=repeats)


def _bisected(frames: SharedFrames, camera: Camera, losses: QualityLosses | None,
              iterations: int, repeats: int) -> FrameSettings:
    """Bisection along the ranked settings, each trial the median of ``repeats`` frames of
    ``camera``; rank 0 searches and shares the result with DONE (collective)."""
    if frames.rank != 0:
        return frames.follow_until_done().settings
    order = quality_order(volume_knob_space(losses))

    def seconds_of(index: int) -> float:
        return float(np.median([
            frames.shared_frame(camera, settings_of(order[index]))[1].record.frame_seconds
            for _ in range(repeats)]))

    found = bisect_by_measurement(len(order), seconds_of, frames.target_seconds,
                                  iterations=iterations)
    settings = settings_of(order[found.index])
    frames.sync.share(frames.state(DONE, settings=settings))
    return settings
