"""The governed volume renderer's calibration frames: random knobs on views off its path.

Rank 0 draws each frame's knobs (:func:`random_settings`) and probes its view; every rank
renders it through the shared-frame protocol (:func:`calibration_samples`). The samples are
what :func:`governed.volume.model_fit.fit_volume_model` fits the frame model on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from governed.volume.frame_sharing import SharedFrames
from governed.volume.knobs import BEST, settings_of, volume_knob_space
from governed.volume.model_fit import CalibrationSample
from governed.volume.workload_probe import RankWorkload
from raytracer.camera import Camera
from raytracer.volume.distributed import FrameSettings

#: the probe of a view: its workload and the seconds probing it took
ViewProbe = Callable[[Camera], tuple[RankWorkload, float]]


def random_settings(rng: np.random.Generator, count: int) -> list[FrameSettings]:
    """Rank 0's knobs of ``count`` calibration frames: a random level of every knob, except
    the first frame's (full quality: it warms the volume up and is not kept)."""
    space = volume_knob_space()
    settings = []
    for i in range(count):
        levels = [int(rng.integers(len(k))) for k in space.knobs]
        settings.append(BEST if i == 0 else settings_of(space.at_levels(levels)))
    return settings


def calibration_samples(frames: SharedFrames, probe: ViewProbe, views: Sequence[Camera],
                        settings: Sequence[FrameSettings] | None, count: int,
                        streamed: np.ndarray) -> list[CalibrationSample]:
    """Render ``count`` frames on ``views`` in turn at rank 0's ``settings`` (None on the
    others), rank 0 probing each view first (collective). Rank 0's samples of every frame but
    the first (it warms the volume up), each with the bricks' ``streamed`` shares; [] on the
    other ranks."""
    samples = []
    for i in range(count):
        cam = views[i % len(views)]
        chosen = workload = None
        if frames.rank == 0:
            chosen = settings[i]
            workload, _ = probe(cam)
        chosen, res = frames.shared_frame(cam, chosen)
        if frames.rank == 0 and i > 0:
            samples.append(CalibrationSample(workload, chosen, res.record, streamed))
    return samples
