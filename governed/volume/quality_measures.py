"""Image quality of the governed volume renderer's settings, measured against full quality.

Both measurements render their frames through the shared-frame protocol
(:class:`~governed.volume.frame_sharing.SharedFrames`), so they are collective: rank 0 gets the
figures, the other ranks render along.
"""

from __future__ import annotations

import numpy as np

from common.image_quality import psnr, ssim
from governed.volume.frame_sharing import SharedFrames
from governed.volume.knobs import (
    BEST,
    QualityLosses,
    knobs_of,
    settings_of,
    to_display,
    volume_knob_space,
)
from raytracer.camera import Camera
from raytracer.volume.distributed import FrameSettings


def knob_losses(frames: SharedFrames, camera: Camera) -> QualityLosses | None:
    """1 − SSIM of each knob's levels against the full-quality frame of ``camera``, each
    knob turned alone (collective; rank 0's losses, None on the others)."""
    _, ref = frames.shared_frame(camera, BEST)
    space = volume_knob_space()
    sweeps: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for knob in space.knobs:
        values = np.unique(np.concatenate([knob.values[:: max(1, len(knob) // 5)],
                                           knob.values[-1:]]))
        losses = []
        for v in values:
            trial = settings_of(knobs_of(BEST) | {knob.name: float(v)})
            _, res = frames.shared_frame(camera, trial if frames.rank == 0 else None)
            if frames.rank == 0:
                losses.append(1.0 - ssim(to_display(res.image), to_display(ref.image)))
        if frames.rank == 0:
            sweeps[knob.name] = (values, np.maximum.accumulate(np.asarray(losses)[::-1])[::-1])
    return QualityLosses(sweeps) if frames.rank == 0 else None


def image_quality(frames: SharedFrames, camera: Camera, settings: FrameSettings | None
                  ) -> dict[str, float]:
    """PSNR and SSIM of ``camera`` at rank 0's ``settings`` (None on the others) against
    the full-quality frame (collective; rank 0's, empty on the others)."""
    _, res = frames.shared_frame(camera, settings)
    _, ref = frames.shared_frame(camera, BEST)
    if frames.rank != 0:
        return {}
    a, b = to_display(res.image), to_display(ref.image)
    return {"psnr": psnr(a, b), "ssim": ssim(a, b)}
