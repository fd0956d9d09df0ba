"""Performance histograms of local render time: the node half of the cluster model.

The histograms of the cluster study (Tkachev, Frey, Müller, Bruder, Ertl: "Prediction of
Distributed Volume Visualization Performance to Support Render Hardware Acquisition", §3).

A histogram summarises the local render times of every rank over every frame of a camera path:
minimum, mean, maximum and the frequencies of 10 equal bins between minimum and maximum
(frequencies sum to 1). Emulation draws sleep times from it; the cluster model uses its 13 numbers
as features. Beyond the paper, a :class:`PathHistogram` keeps one histogram per frame as well (a
distribution of distributions), so "all ranks slow in some frames" is not mistaken for "some
ranks always slow". Pure numbers; JSON in and out as dicts with a version.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from common.json_file import check_versioned, versioned

BINS = 10
HISTOGRAM_KIND = "autotune-performance-histogram"
HISTOGRAM_VERSION = 1


class HistogramError(ValueError):
    """A histogram cannot be built or read: no samples, non-finite times, wrong version."""


@dataclass(frozen=True)
class PerfHistogram:
    """min / mean / max of local render seconds and the frequencies of ``BINS`` bins."""

    minimum: float
    mean: float
    maximum: float
    frequencies: tuple[float, ...]
    samples: int

    def __post_init__(self) -> None:
        f = np.asarray(self.frequencies, np.float64)
        vals = (self.minimum, self.mean, self.maximum)
        if self.samples < 1:
            raise HistogramError("a histogram needs at least one sample")
        if not all(math.isfinite(v) and v >= 0 for v in vals) or not np.all(np.isfinite(f)):
            raise HistogramError(f"histogram values must be finite and >= 0, got {vals}")
        if not self.minimum <= self.mean <= self.maximum * (1 + 1e-9) + 1e-15:
            raise HistogramError(f"histogram needs min <= mean <= max, got {vals}")
        if len(f) != BINS or np.any(f < 0) or abs(f.sum() - 1.0) > 1e-6:
            raise HistogramError(f"histogram needs {BINS} frequencies >= 0 summing to 1")

    @classmethod
    def of(cls, seconds: ArrayLike) -> PerfHistogram:
        """The histogram of measured local render times (any shape: ranks x frames, flat...)."""
        t = np.asarray(seconds, np.float64).ravel()
        if t.size == 0:
            raise HistogramError("a histogram needs at least one timed sample, got none")
        if not np.all(np.isfinite(t)) or np.any(t < 0):
            raise HistogramError("render times must be finite and >= 0")
        lo, hi = float(t.min()), float(t.max())
        if hi > lo:
            counts, _ = np.histogram(t, bins=BINS, range=(lo, hi))
        else:
            counts = np.zeros(BINS)
            counts[0] = t.size
        return cls(lo, float(t.mean()), hi, tuple(float(c) for c in counts / t.size), int(t.size))

    @property
    def edges(self) -> NDArray[np.float64]:
        return np.linspace(self.minimum, self.maximum, BINS + 1)

    def features(self) -> NDArray[np.float64]:
        """The paper's 13 features: min, mean, max (seconds) and the bin frequencies."""
        return np.array([self.minimum, self.mean, self.maximum, *self.frequencies])

    def sample(self, rng: np.random.Generator, size: int | tuple[int, ...]) -> NDArray:
        """Draw render times: a bin by its frequency, then uniformly inside it."""
        idx = rng.choice(BINS, size=size, p=np.asarray(self.frequencies) / sum(self.frequencies))
        e = self.edges
        return e[idx] + rng.random(size) * (e[idx + 1] - e[idx])

    def expected_max(self, draws: int) -> float:
        """E[max of ``draws`` independent draws] (:func:`expected_max`)."""
        return expected_max(self.minimum, self.maximum, self.frequencies, draws, self.mean)

    def scaled(self, factor: float) -> PerfHistogram:
        """The same shape on a node ``factor`` times as slow (0.7 = 30 % faster), as in the
        paper."""
        if not (math.isfinite(factor) and factor > 0):
            raise HistogramError(f"scale factor must be finite and > 0, got {factor}")
        return PerfHistogram(self.minimum * factor, self.mean * factor, self.maximum * factor,
                             self.frequencies, self.samples)

    def perturbed(self, rng: np.random.Generator, amount: float = 0.2) -> PerfHistogram:
        """A generated histogram: frequencies and range perturbed uniformly by ``amount``."""
        f = np.asarray(self.frequencies) * rng.uniform(1 - amount, 1 + amount, BINS)
        f = f / f.sum()
        lo = self.minimum * rng.uniform(1 - amount, 1 + amount)
        hi = max(lo, self.maximum * rng.uniform(1 - amount, 1 + amount))
        centres = 0.5 * (np.linspace(lo, hi, BINS + 1)[:-1] + np.linspace(lo, hi, BINS + 1)[1:])
        return PerfHistogram(lo, float(np.clip(f @ centres, lo, hi)), hi, tuple(map(float, f)),
                             self.samples)

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.minimum, "mean": self.mean, "max": self.maximum,
                "frequencies": list(self.frequencies), "samples": self.samples}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> PerfHistogram:
        try:
            return cls(float(d["min"]), float(d["mean"]), float(d["max"]),
                       tuple(float(x) for x in d["frequencies"]), int(d["samples"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise HistogramError(f"{where}: not a performance histogram ({exc})") from None


def expected_max(minimum: float, maximum: float, frequencies: ArrayLike, draws: int,
                 mean: float | None = None) -> float:
    """E[max of ``draws`` independent draws] from a histogram whose bins are uniform inside:
    the local render part of a frame when each of ``draws`` ranks draws its time on its own."""
    f = np.clip(np.asarray(frequencies, np.float64), 0.0, None)
    if draws <= 1 and mean is not None:
        return float(mean)
    if maximum <= minimum or f.sum() <= 0:
        return float(minimum)
    e = np.linspace(minimum, maximum, f.size + 1)
    cdf = np.concatenate([[0.0], np.cumsum(f)]) / f.sum()
    u = np.linspace(0.0, 1.0, 65)
    total = float(minimum)
    for i in range(f.size):  # ∫ (1 − F(t)^P) dt with F linear inside each bin
        c = cdf[i] + (cdf[i + 1] - cdf[i]) * u
        total += float(np.trapezoid(1.0 - c ** max(draws, 1), u)) * (e[i + 1] - e[i])
    return total


@dataclass(frozen=True)
class PathHistogram:
    """Local render times of a camera path: one histogram over everything, one per frame."""

    overall: PerfHistogram
    per_frame: tuple[PerfHistogram, ...]
    ranks: int
    meta: Mapping[str, Any]

    @classmethod
    def of(cls, seconds: ArrayLike, meta: Mapping[str, Any] | None = None) -> PathHistogram:
        """From a (frames, ranks) array of measured local render seconds."""
        t = np.asarray(seconds, np.float64)
        if t.ndim != 2 or t.size == 0:
            raise HistogramError(f"expected (frames, ranks) render times, got shape {t.shape}")
        return cls(PerfHistogram.of(t), tuple(PerfHistogram.of(row) for row in t), t.shape[1],
                   dict(meta or {}))

    def sample_frames(self, rng: np.random.Generator, frames: int, ranks: int,
                      per_frame: bool) -> NDArray:
        """(frames, ranks) emulated render times: from each frame's histogram (cycling over the
        path) when ``per_frame``, else every frame from the overall one (the paper's emulation)."""
        if not per_frame:
            return self.overall.sample(rng, (frames, ranks))
        return np.stack([self.per_frame[f % len(self.per_frame)].sample(rng, ranks)
                         for f in range(frames)])

    def frame_spread(self) -> NDArray:
        """Per-frame features: mean and max of each frame's histogram relative to the overall
        mean (what a flat histogram loses: whether slowness comes frame by frame)."""
        m = max(self.overall.mean, 1e-12)
        means = np.array([h.mean for h in self.per_frame]) / m
        maxes = np.array([h.maximum for h in self.per_frame]) / m
        return np.array([means.std(), maxes.mean(), maxes.max()])

    def scaled(self, factor: float) -> PathHistogram:
        meta = dict(self.meta)
        if "rank_means" in meta:
            meta["rank_means"] = [float(m) * factor for m in meta["rank_means"]]
        return PathHistogram(self.overall.scaled(factor),
                             tuple(h.scaled(factor) for h in self.per_frame), self.ranks,
                             {**meta, "scaled": factor})

    def perturbed(self, rng: np.random.Generator, amount: float = 0.2) -> PathHistogram:
        """A generated path histogram: the overall one perturbed, each frame's one perturbed and
        moved by the same factor as the overall mean (the paper's generated histograms)."""
        overall = self.overall.perturbed(rng, amount)
        factor = overall.mean / self.overall.mean if self.overall.mean > 0 else 1.0
        frames = tuple(h.scaled(factor).perturbed(rng, amount) if factor > 0 else h
                       for h in self.per_frame)
        meta = dict(self.meta)
        if "rank_means" in meta:
            meta["rank_means"] = [float(m) * factor for m in meta["rank_means"]]
        return PathHistogram(overall, frames, self.ranks, {**meta, "perturbed": amount})

    def to_dict(self) -> dict[str, Any]:
        return versioned(HISTOGRAM_KIND, HISTOGRAM_VERSION, {
            "ranks": self.ranks, "meta": dict(self.meta), "overall": self.overall.to_dict(),
            "per_frame": [h.to_dict() for h in self.per_frame]})

    @classmethod
    def from_dict(cls, d: Any, where: str) -> PathHistogram:
        d = check_versioned(d, HISTOGRAM_KIND, HISTOGRAM_VERSION, where, HistogramError,
                            "performance histogram")
        frames = d.get("per_frame") or []
        if not isinstance(frames, Sequence):
            raise HistogramError(f"{where}: per_frame must be a list")
        try:
            ranks = int(d["ranks"])
        except (KeyError, TypeError, ValueError):
            raise HistogramError(f"{where}: missing or bad 'ranks'") from None
        return cls(PerfHistogram.from_dict(d.get("overall", {}), f"{where}: overall"),
                   tuple(PerfHistogram.from_dict(h, f"{where}: frame {i}")
                         for i, h in enumerate(frames)), ranks, dict(d.get("meta", {})))
