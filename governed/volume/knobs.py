"""The volume renderer's knobs for the tuner, and what each knob costs in looks.

Knobs: sampling rate (samples per voxel, continuous: step = 1 / rate), image scale and the
early-termination threshold. Which setting looks best is measured, not assumed: on a
calibration view of the volume governed, a grid of sampling rates × image scales and a sweep
of the threshold score 1 − SSIM against the full-quality frame (:class:`QualityLosses`), and
the tuner maximizes minus the grid's loss plus the threshold's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune import FloatKnob, KnobSpace
from raytracer.volume.distributed import FrameSettings

RATES = (0.25, 2.0, 36)  # samples per voxel: low, high, levels
#: image scale in sixteenths: where the sampling rate is at its highest, a step of an eighth
#: (a third more pixels) left frames 10-20 % under the target (neghip at 512²); on the
#: validation volumes (neghip, aneurism, field:96; 512², 2 ranks, targets of half and 0.7 of
#: the first view's full-quality frame, three interleaved quiet runs each) the mean / p95 off
#: target 7.5 / 18.3 % in eighths, 7.2 / 16.9 % in sixteenths, SSIM 0.9952 against 0.9956
SCALES = (0.5, 1.0, 9)
ERT = (0.95, 1.0, 3)
BEST = FrameSettings(step=1.0 / RATES[1], image_scale=SCALES[1], ert_threshold=ERT[1])


def volume_knob_space(losses: QualityLosses | None = None) -> KnobSpace:
    """The volume renderer's knobs, worst look first; quality from measured losses if given."""
    knobs = [FloatKnob("sampling_rate", *RATES[:2], levels=RATES[2]),
             FloatKnob("image_scale", *SCALES[:2], levels=SCALES[2], weight=2.0),
             FloatKnob("ert_threshold", *ERT[:2], levels=ERT[2], weight=0.5)]
    return KnobSpace(knobs, quality=losses.quality if losses is not None else None)


def knob_steps() -> list[float]:
    """Every sample step the tuner can choose, one per sampling-rate level, as
    :func:`settings_of` computes it (what a renderer prepares before its frames are timed)."""
    rate = next(k for k in volume_knob_space().knobs if k.name == "sampling_rate")
    return [settings_of({"sampling_rate": v, "image_scale": 1.0, "ert_threshold": 1.0}).step
            for v in rate.values]


def settings_of(knobs: dict[str, Any]) -> FrameSettings:
    """The frame settings of the tuner's knobs (the inverse of :func:`knobs_of`)."""
    return _frame_settings(float(knobs["sampling_rate"]), float(knobs["image_scale"]),
                           float(knobs["ert_threshold"]))


@functools.lru_cache(maxsize=4096)
def _frame_settings(rate: float, scale: float, ert: float) -> FrameSettings:
    """One (immutable) FrameSettings per knob values: the tuner asks for one every frame,
    after the render has evicted the caches, where building and checking it cost 10 µs."""
    return FrameSettings(step=1.0 / rate, image_scale=scale, ert_threshold=ert)


@dataclass
class QualityLosses:
    """1 − SSIM against the full-quality frame: over a grid of sampling rates × image scales
    measured together, and along each other knob alone (the others at their best). The two
    are measured together because their losses do not add: a lower image scale blurs away
    much of what a lower rate loses, and the sum of the two sweeps ranked low rates too far
    down."""

    rates: np.ndarray  # sampling rates of the grid, ascending
    scales: np.ndarray  # image scales of the grid, ascending
    joint: np.ndarray  # (rates, scales) losses
    sweeps: dict[str, tuple[np.ndarray, np.ndarray]]  # knob -> (values, losses): the others

    def quality(self, c: dict[str, np.ndarray]) -> np.ndarray:
        """Minus the losses of candidates ``c`` (the tuner's quality: higher is better): the
        grid's, bilinear between its points, plus each other knob's."""
        total = _bilinear(self.joint, self.rates, self.scales, c["sampling_rate"],
                          c["image_scale"])
        for name, (values, losses) in self.sweeps.items():
            total = total + np.interp(np.asarray(c[name], np.float64), values, losses)
        return -np.asarray(total, np.float64)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return {"sampling_rate_x_image_scale": {"rates": self.rates.tolist(),
                                                "scales": self.scales.tolist(),
                                                "losses": self.joint.tolist()},
                **{k: {"values": v.tolist(), "losses": loss.tolist()}
                   for k, (v, loss) in self.sweeps.items()}}


def _bilinear(table: np.ndarray, xs: np.ndarray, ys: np.ndarray, x: Any, y: Any) -> np.ndarray:
    """``table`` (len(xs), len(ys)) interpolated bilinearly at points (``x``, ``y``), each
    clamped to the grid (both grids ascending, at least two points each)."""
    fx = np.interp(np.asarray(x, np.float64), xs, np.arange(len(xs), dtype=np.float64))
    fy = np.interp(np.asarray(y, np.float64), ys, np.arange(len(ys), dtype=np.float64))
    i = np.minimum(fx.astype(np.int64), len(xs) - 2)
    j = np.minimum(fy.astype(np.int64), len(ys) - 2)
    tx, ty = fx - i, fy - j
    return ((table[i, j] * (1.0 - tx) + table[i + 1, j] * tx) * (1.0 - ty)
            + (table[i, j + 1] * (1.0 - tx) + table[i + 1, j + 1] * tx) * ty)


def to_display(rgba: np.ndarray) -> np.ndarray:
    """Premultiplied RGBA over black as RGB in [0, 1] (what the user sees)."""
    return np.clip(rgba[..., :3], 0.0, 1.0)


def knobs_of(s: FrameSettings) -> dict[str, float]:
    """The tuner's knobs for frame settings (the inverse of :func:`settings_of`)."""
    return {"sampling_rate": 1.0 / s.step, "image_scale": s.image_scale,
            "ert_threshold": s.ert_threshold}


def one_setting(s: FrameSettings) -> dict[str, np.ndarray]:
    """Frame settings as a one-candidate knob batch (what the model prices)."""
    return {k: np.array([v]) for k, v in knobs_of(s).items()}
