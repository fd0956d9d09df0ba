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
    """1 − SSIM against the full-quality frame of ``camera``: over a grid of sampling rates ×
    image scales (every seventh rate level and every other scale level, each knob's best
    included: 30 frames), and along each other knob alone, the others at their best
    (collective; rank 0's losses, None on the others). Each is made monotone: no setting is
    taken for worse-looking than a cheaper one on the same knob."""
    _, ref = frames.shared_frame(camera, BEST)

    def loss(knobs: dict[str, float]) -> float:
        trial = settings_of(knobs_of(BEST) | knobs) if frames.rank == 0 else None
        _, res = frames.shared_frame(camera, trial)
        return 1.0 - ssim(to_display(res.image), to_display(ref.image)) \
            if frames.rank == 0 else 0.0

    knobs = {k.name: k for k in volume_knob_space().knobs}
    rates = _levels(knobs["sampling_rate"].values, 7)
    scales = _levels(knobs["image_scale"].values, 2)
    joint = np.array([[loss({"sampling_rate": float(r), "image_scale": float(s)})
                       for s in scales] for r in rates])
    others = [k for k in knobs if k not in ("sampling_rate", "image_scale")]  # a list: every
    # rank renders the same frames in the same order
    sweeps = {name: (knobs[name].values, np.array([loss({name: float(v)})
                                                   for v in knobs[name].values]))
              for name in others}
    if frames.rank != 0:
        return None
    return QualityLosses(rates, scales, _monotone(_monotone(joint, 0), 1),
                         {k: (v, _monotone(lost, 0)) for k, (v, lost) in sweeps.items()})


def _monotone(losses: np.ndarray, axis: int) -> np.ndarray:
    """``losses`` with none below that of a higher level along ``axis`` (a level no worse
    than the ones above it: SSIM's scatter must not rank a cheaper setting better)."""
    return np.flip(np.maximum.accumulate(np.flip(losses, axis), axis=axis), axis)


def _levels(values: np.ndarray, every: int) -> np.ndarray:
    """Every ``every``-th of a knob's levels from the lowest, and its highest."""
    return np.unique(np.concatenate([values[::every], values[-1:]]))


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
