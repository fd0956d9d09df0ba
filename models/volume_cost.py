"""Per-rank analytical model of the distributed volume renderer.

After the per-process analytical model (HemoCell study), each code section of a rank's frame
gets a small linear model in the quantities that drive it, calibrated per rank by non-negative
least squares from measured section timings:

* local raycast: ``a·samples + e·skipped + j·jumps + b·rays + c·pixels + d`` (samples taken
  inside the rank's brick, lattice positions passed over in empty blocks, jumps over empty
  space, rays that enter the brick, pixels of the full-size image the rank clears and hands
  on). A jump is a distance lookup and a cube exit, whatever the step: a ray through thin
  structures (aneurism's vessels) makes many at few samples, which a cost per skipped position
  priced as a few samples (chosen on the validation volumes' frames, 2 ranks at 512², the
  models fitted on 48 frames each of bonsai and ironprot, priced on the probe's estimates:
  per-rank error 10.2 -> 7.4 %, aneurism 21 -> 13 %, field:96 6.0 -> 5.2 %, neghip 3.2 ->
  3.9 %). A sample or a skip costs
  ``a`` or ``e`` when the data it reads stay in the core's cache and ``a'`` or ``e'`` when
  they stream from memory, mixed by the brick's *streamed share* ``m = W / (W + L2)`` (``W``:
  bytes of the brick's non-empty blocks): bonsai's 6 MB per brick and a 0.6 MB volume differ
  by 2-3x per sample on the same machine, which one constant cannot carry from one volume to
  another; and a sample costs ``z·samples`` more as the rays cross the volume's z slices
  faster (``z``: the mean |z component| of their direction in voxels): a step along z, the
  slowest axis of the brick's memory, lands a slice away, where one along x stays in the same
  cache line (chosen on the validation volumes' collected frames, 2 ranks, with each rank's
  correction (models.rank_correction) applied: the per-rank error 7.3 -> 7.2 % at 256² and
  6.7 -> 5.6 % at 512² calibrated on the volume itself, 9.1 -> 9.0 % and 8.1 -> 7.8 % carried
  over from bonsai and ironprot; the calibration frames' residuals had correlated with it at
  0.3-0.6 on every volume); and ``q·samples`` more as the image plane runs along the z
  slices (``q``: |z component| of the image's right plus its up axis, in voxels): a SIMD
  group's lanes and a tile's rows are neighbours in the image, and they read one cache line
  where the plane lies across the slices but a slice apart each where it runs along them
  (chosen on the validation volumes' collected frames, 2 ranks, models fitted on bonsai and
  ironprot, four quiet collections of 96 frames per volume on calibration views and an orbit:
  the validation volumes' mean per-rank error 9.9 -> 9.2, 8.4 -> 7.6 and 7.9 -> 7.2 % at
  512², 10.9 -> 10.7 % at 256²; bonsai's orbit 0.3-0.7 points lower; the view's direction
  alone, as |y| or |x| components or y and z crossings together, had moved the same figures
  either way);
* each compositing stage: ``α·partners/max_partners + β·bytes + γ·blended_pixels``: a
  latency share by the HemoCell study's neighbour-count ratio, added to a bandwidth term and a
  blend-rate term (the study multiplies its communication term by the ratio instead; on 2 ranks,
  or any power of two under binary swap, every stage has one partner, the ratio is 1 and the
  two forms are one model: telling them apart needs stages whose partner counts differ);
* the gather to rank 0: ``α_g + β_g·bytes``.

Sections that run concurrently on all ranks are aggregated with ``max`` over ranks, sequential
ones are summed: rank 0's frame = max_i render_i + Σ_stages max_i stage_i + gather. Everything
here is numbers in, numbers out.

A rank's render is its work in the clock of its device (raytracer/volume/distributed.py
``work_clock``): process CPU seconds on a CPU device, kernel event seconds on a GPU. Ranks
on one machine's CPU device share its cores (:func:`shared_finish`); on any other device
they do not (:func:`shares_cores`, set by :attr:`ClusterFrameModel.device_kind`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numba as nb
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.optimize import least_squares, nnls

from models.core_sharing import shared_finish, shares_cores

#: Streamed shares of the calibration frames closer than this cannot tell the cached and the
#: streamed cost apart: the fit then gives both the same value
MIN_STREAMED_SPREAD = 0.1
#: Nor can slice crossings closer than this tell a crossing cost from the cost of a sample
MIN_CROSSING_SPREAD = 0.1
ROBUST_SCALE = 0.1  # residuals (relative) beyond ~10 % count linearly, not squared
#: The robust fit runs to this tolerance, far below scipy's 1e-8: where a design is rank
#: deficient (compositing work of two sizes only) the default stop left the fitted seconds
#: 2e-5 apart between an AMD Zen 3 and an Intel Xeon model 167; run to convergence they agree
FIT_TOLERANCE = 1e-12
STAGE_TERMS = ("partners", "bytes", "pixels")
GATHER_TERMS = ("const", "bytes")


class VolumeModelError(ValueError):
    """A model cannot be fitted or evaluated: too few rows, non-finite data, bad coefficients."""


def _design(columns: Sequence[ArrayLike], n: int) -> NDArray[np.float64]:
    x = np.empty((n, len(columns)))
    for j, col in enumerate(columns):
        x[:, j] = np.broadcast_to(np.asarray(col, np.float64), (n,))
    if not np.all(np.isfinite(x)):
        raise VolumeModelError("non-finite values in the model's inputs")
    return x


def _fit_nnls(x: NDArray[np.float64], y: ArrayLike, what: str,
              relative: bool = True) -> tuple[NDArray, float]:
    """Non-negative least squares on relative errors (rows scaled by 1/y, so small and large
    frames weigh alike) or, for small noisy sections whose tiny rows would dominate a relative
    fit, on absolute errors; a soft-L1 loss keeps frames hit by a contention spike (a shared
    machine, an oversubscribed core) from bending the fit."""
    y = np.asarray(y, np.float64)
    if len(y) < x.shape[1]:
        raise VolumeModelError(f"{what}: {len(y)} timed frames cannot fit {x.shape[1]} "
                               f"coefficients")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise VolumeModelError(f"{what}: measured times must be finite and > 0")
    scale = x.max(axis=0)
    scale[scale == 0] = 1.0
    w = 1.0 / y if relative else np.full_like(y, 1.0 / y.mean())
    a, b = (x / scale) * w[:, None], y * w
    start, _ = nnls(a, b)
    robust = least_squares(lambda c: a @ c - b, start, bounds=(0.0, np.inf), loss="soft_l1",
                           f_scale=ROBUST_SCALE, ftol=FIT_TOLERANCE, xtol=FIT_TOLERANCE,
                           gtol=FIT_TOLERANCE)
    coef = robust.x / scale
    pred = x @ coef
    return coef, float(np.mean(np.abs(pred - y) / y))


def _check_coefficients(model: Any, what: str) -> None:
    """Every coefficient of a section model is a finite cost >= 0."""
    for k, v in asdict(model).items():
        if k != "fit_error" and not (math.isfinite(v) and v >= 0):
            raise VolumeModelError(f"{what}: {k} must be finite and >= 0, got {v}")


def streamed_share(working_set_bytes: ArrayLike, cache_bytes: float) -> NDArray:
    """Share of a brick's reads that stream from memory: ``W / (W + cache)``, 0 for no data."""
    w = np.asarray(working_set_bytes, np.float64)
    if not (math.isfinite(cache_bytes) and cache_bytes > 0):
        raise VolumeModelError(f"cache size must be a finite number of bytes > 0, got "
                               f"{cache_bytes}")
    return w / (w + cache_bytes)


def crossing_cost(per_crossing: ArrayLike, per_plane: ArrayLike, slice_crossing: ArrayLike,
                  plane_crossing: ArrayLike) -> NDArray:
    """What the view's slice and plane crossings add to a sample's cost, in one order of
    operations for :func:`render_seconds` and the compiled pricing (which must agree bit for
    bit)."""
    return (np.asarray(per_crossing, np.float64) * np.asarray(slice_crossing, np.float64)
            + np.asarray(per_plane, np.float64) * np.asarray(plane_crossing, np.float64))


def render_seconds(coefficients: Sequence[ArrayLike], samples: ArrayLike, skipped: ArrayLike,
                   rays: ArrayLike, pixels: ArrayLike, streamed: ArrayLike = 0.0,
                   slice_crossing: ArrayLike = 0.0, jumps: ArrayLike = 0.0,
                   plane_crossing: ArrayLike = 0.0) -> NDArray:
    """:class:`RenderModel`'s formula on its ten ``coefficients`` (field order): numbers
    for one rank, or (ranks, 1) arrays against (ranks, candidates) counts for all at once."""
    a, e, b, c, d, a_streamed, e_streamed, a_crossing, j, a_plane = coefficients
    m = np.asarray(streamed, np.float64)
    crossing = crossing_cost(a_crossing, a_plane, slice_crossing, plane_crossing)
    return ((a * (1 - m) + a_streamed * m + crossing) * np.asarray(samples, np.float64)
            + (e * (1 - m) + e_streamed * m) * np.asarray(skipped, np.float64)
            + j * np.asarray(jumps, np.float64)
            + b * np.asarray(rays, np.float64) + c * np.asarray(pixels, np.float64) + d)


@dataclass(frozen=True)
class RenderModel:
    """One rank's local raycast time: ``a·samples + e·skipped + j·jumps + b·rays + c·pixels +
    d`` s, with ``a``, ``e`` mixed between their cached and streamed values by the streamed
    share and ``a`` growing by ``per_sample_crossing`` times the rays' slice crossing and by
    ``per_sample_plane`` times the image plane's."""

    per_sample: float
    per_skipped: float
    per_ray: float
    per_pixel: float
    constant: float
    per_sample_streamed: float = 0.0
    per_skipped_streamed: float = 0.0
    per_sample_crossing: float = 0.0
    per_jump: float = 0.0  # a jump over empty space (0 in a model from before it was priced)
    per_sample_plane: float = 0.0  # per unit of plane crossing (0 in a model from before it)
    fit_error: float = math.nan  # mean relative error on the rows it was fitted on (in-sample)

    def __post_init__(self) -> None:
        _check_coefficients(self, "render model")

    @property
    def coefficients(self) -> tuple[float, ...]:
        """The ten costs in field order (what :func:`render_seconds` takes)."""
        return (self.per_sample, self.per_skipped, self.per_ray, self.per_pixel, self.constant,
                self.per_sample_streamed, self.per_skipped_streamed, self.per_sample_crossing,
                self.per_jump, self.per_sample_plane)

    def predict(self, samples: ArrayLike, skipped: ArrayLike, rays: ArrayLike,
                pixels: ArrayLike, streamed: ArrayLike = 0.0, slice_crossing: ArrayLike = 0.0,
                jumps: ArrayLike = 0.0, plane_crossing: ArrayLike = 0.0) -> NDArray:
        return render_seconds(self.coefficients, samples, skipped, rays, pixels, streamed,
                              slice_crossing, jumps, plane_crossing)

    @classmethod
    def fit(cls, samples: ArrayLike, skipped: ArrayLike, rays: ArrayLike, pixels: ArrayLike,
            seconds: ArrayLike, streamed: ArrayLike = 0.0, slice_crossing: ArrayLike = 0.0,
            jumps: ArrayLike = 0.0, plane_crossing: ArrayLike = 0.0) -> RenderModel:
        """Fit on timed frames; where their streamed shares barely differ (one volume), the
        cached and streamed costs are one coefficient (see MIN_STREAMED_SPREAD), where their
        slice or plane crossings barely differ (one direction), there is no such crossing
        cost, and where no frame jumps over empty space, no jump cost."""
        y = np.asarray(seconds, np.float64)
        m = np.broadcast_to(np.asarray(streamed, np.float64), y.shape)
        z = np.broadcast_to(np.asarray(slice_crossing, np.float64), y.shape)
        j = np.broadcast_to(np.asarray(jumps, np.float64), y.shape)
        q = np.broadcast_to(np.asarray(plane_crossing, np.float64), y.shape)
        s, k = np.asarray(samples, np.float64), np.asarray(skipped, np.float64)
        crossing = [s * z] if np.ptp(z) >= MIN_CROSSING_SPREAD else []
        jumped = [j] if np.any(j > 0) else []
        plane = [s * q] if np.ptp(q) >= MIN_CROSSING_SPREAD else []
        one = np.ptp(m) < MIN_STREAMED_SPREAD
        columns = [s, k, rays, pixels, 1.0] if one else \
            [s * (1 - m), k * (1 - m), rays, pixels, 1.0, s * m, k * m]
        coef, err = _fit_nnls(_design(columns + crossing + jumped + plane, len(y)), y,
                              "render model")
        values = [float(v) for v in coef]
        if one:  # the cached and the streamed costs are the same
            values[5:5] = values[:2]
        if not crossing:
            values.insert(7, 0.0)
        if not jumped:
            values.insert(8, 0.0)
        if not plane:
            values.append(0.0)
        return cls(*values, fit_error=err)


@dataclass(frozen=True)
class StageModel:
    """One compositing stage: ``α·partners/max_partners + β·bytes + γ·blended_pixels`` seconds."""

    per_partner: float
    per_byte: float
    per_pixel: float
    fit_error: float = math.nan

    def __post_init__(self) -> None:
        _check_coefficients(self, "stage model")

    def predict(self, partner_ratio: ArrayLike, nbytes: ArrayLike, pixels: ArrayLike) -> NDArray:
        return (self.per_partner * np.asarray(partner_ratio, np.float64)
                + self.per_byte * np.asarray(nbytes, np.float64)
                + self.per_pixel * np.asarray(pixels, np.float64))

    @classmethod
    def fit(cls, partner_ratio: ArrayLike, nbytes: ArrayLike, pixels: ArrayLike,
            seconds: ArrayLike) -> StageModel:
        y = np.asarray(seconds, np.float64)
        x = _design([partner_ratio, nbytes, pixels], len(y))
        coef, err = _fit_nnls(x, y, "compositing stage model")
        return cls(*map(float, coef), fit_error=err)


@dataclass(frozen=True)
class GatherModel:
    """The gather of the composited pieces to rank 0: ``α + β·bytes`` seconds."""

    constant: float
    per_byte: float
    fit_error: float = math.nan

    def predict(self, nbytes: ArrayLike) -> NDArray:
        return self.constant + self.per_byte * np.asarray(nbytes, np.float64)

    @classmethod
    def fit(cls, nbytes: ArrayLike, seconds: ArrayLike) -> GatherModel:
        y = np.asarray(seconds, np.float64)
        coef, err = _fit_nnls(_design([1.0, nbytes], len(y)), y, "gather model")
        return cls(float(coef[0]), float(coef[1]), fit_error=err)


def fit_compositing(partner_ratio: ArrayLike, nbytes: ArrayLike, pixels: ArrayLike,
                    gather_bytes: ArrayLike, seconds: ArrayLike) -> tuple[StageModel, GatherModel]:
    """Fit the stage and gather models jointly on whole-frame compositing times.

    Per frame: the sums over stages of the slowest rank's partner ratio, bytes and blended
    pixels, the bytes gathered to rank 0, and the measured compositing + gather seconds (stage
    times of single ranks include waiting for slower partners; the frame total does not).
    """
    y = np.asarray(seconds, np.float64)
    x = _design([partner_ratio, nbytes, pixels, 1.0, gather_bytes], len(y))
    coef, err = _fit_nnls(x, y, "compositing model", relative=False)
    return (StageModel(float(coef[0]), float(coef[1]), float(coef[2]), fit_error=err),
            GatherModel(float(coef[3]), float(coef[4]), fit_error=err))


@dataclass(frozen=True)
class StageWork:
    """What one compositing stage costs a rank at full image scale (it scales with pixels)."""

    partners: int
    max_partners: int
    nbytes: float  # bytes sent + received by the rank in this stage at scale 1
    pixels: float  # pixels blended by the rank in this stage at scale 1

    @property
    def partner_ratio(self) -> float:
        return self.partners / max(self.max_partners, 1)


@dataclass(frozen=True)
class ClusterFrameModel:
    """Rank 0's frame time for a P-rank frame: per-rank render models, stage and gather models.

    ``device_kind``: the OpenCL device kind the ranks render on, the one switch of the
    core-sharing terms (:func:`shares_cores`): on any but a CPU device ``cores``, ``threads``
    and ``core_groups`` are set to "nothing shared" (inf, 1, ()) whatever was passed, so every
    use of them (:meth:`sections_of`, :meth:`slowest_render_on_grid`, a caller's own
    :func:`shared_finish`) prices each rank's render as its kernel seconds."""

    render: tuple[RenderModel, ...]  # one per rank, in seconds of work (in its device's clock)
    stage: StageModel  # shared by all stages and ranks (same code, same links)
    gather: GatherModel
    meta: dict[str, Any] = field(default_factory=dict)
    cores: float = math.inf  # cores the ranks share (inf: each rank has its own node)
    threads: float = 1.0  # threads each rank's renderer runs
    core_groups: tuple[int, ...] = ()  # each rank's group of pinned cores (shared_finish)
    device_kind: str = "CPU"  # "CPU", "GPU", ...: DeviceInfo.kind of the ranks' devices

    def __post_init__(self) -> None:
        if not shares_cores(self.device_kind):
            object.__setattr__(self, "cores", math.inf)
            object.__setattr__(self, "threads", 1.0)
            object.__setattr__(self, "core_groups", ())

    @property
    def ranks(self) -> int:
        return len(self.render)

    def rank_work(self, samples: ArrayLike, skipped: ArrayLike, rays: ArrayLike,
                  pixels: ArrayLike, streamed: ArrayLike = 0.0, slice_crossing: float = 0.0,
                  jumps: ArrayLike = 0.0, plane_crossing: float = 0.0) -> NDArray:
        """(ranks, candidates) seconds of work of each rank's local render.

        ``samples``/``skipped``/``rays``: (ranks, candidates) estimates; ``pixels``:
        (candidates,) rendered pixels; ``streamed``: each rank's streamed share (a number for
        all, or one per rank); ``slice_crossing``, ``plane_crossing``: the view's (the same
        for every rank); ``jumps``: (ranks, candidates) jumps over empty space (0: none
        priced)."""
        samples = np.atleast_2d(np.asarray(samples, np.float64))
        skipped = np.atleast_2d(np.asarray(skipped, np.float64))
        rays = np.atleast_2d(np.asarray(rays, np.float64))
        if samples.shape[0] != self.ranks or rays.shape != samples.shape \
                or skipped.shape != samples.shape:
            raise VolumeModelError(f"expected ({self.ranks}, candidates) samples, skipped and "
                                   f"rays, got {samples.shape}, {skipped.shape}, {rays.shape}")
        share = np.broadcast_to(np.asarray(streamed, np.float64), (self.ranks,))[:, None]
        return render_seconds(self._stacked_render, samples, skipped, rays, pixels, share,
                              slice_crossing, jumps, plane_crossing)

    @functools.cached_property
    def _stacked_render(self) -> tuple[NDArray, ...]:
        """The ranks' render coefficients as (ranks, 1) arrays, one per field."""
        return tuple(c[:, None] for c in self._coefficient_table)

    def slowest_render_on_grid(self, length: NDArray, span: NDArray, jumps: NDArray,
                               rays: NDArray, ratio: NDArray, streamed: ArrayLike,
                               slice_crossing: float, threshold: NDArray, scale_of: NDArray,
                               pixels: NDArray, pixels_per_step: NDArray,
                               correction: ArrayLike = 1.0,
                               after_by_scale: ArrayLike | None = None,
                               plane_crossing: float = 0.0) -> NDArray:
        """``sections_of(rank_work(...))["render"]`` for candidates priced from a workload
        probe, in one compiled pass (the tuner prices hundreds every frame, and each NumPy
        call of the general path costs it microseconds): rank r of candidate j takes
        ``length[t, r]·pixels_per_step[j]·ratio[t, r, s]`` samples,
        ``(span − length)[t, r]·pixels_per_step[j]`` skipped positions,
        ``jumps[t, r]·pixels[j]`` jumps and ``rays[r]·pixels[j]`` rays, with t =
        ``threshold[j]`` and s = ``scale_of[j]``, its work times ``correction[r]`` (a number
        for all ranks, or one per rank); plus ``after_by_scale[s]`` where given: the seconds
        that follow the render at each scale (compositing, gather, upscale). The view's slice
        and plane crossings price each sample alike for every candidate."""
        def floats(a: ArrayLike) -> NDArray:
            return np.ascontiguousarray(a, np.float64)

        def indices(a: ArrayLike) -> NDArray:
            return np.ascontiguousarray(a, np.int64)

        share = np.array(np.broadcast_to(streamed, (self.ranks,)), np.float64)
        factor = np.array(np.broadcast_to(correction, (self.ranks,)), np.float64)
        scale_of = indices(scale_of)
        after = np.zeros(int(scale_of.max(initial=0)) + 1) if after_by_scale is None \
            else floats(after_by_scale)
        group_of, group_cores = self._group_table
        return _slowest_render(floats(length), floats(span), floats(jumps), floats(rays),
                               floats(ratio),
                               self._coefficient_table, share,
                               self._crossing_cost(slice_crossing, plane_crossing),
                               factor, indices(threshold),
                               scale_of, floats(pixels), floats(pixels_per_step),
                               group_of, group_cores, float(self.threads), after)

    def candidate_render_work(self, length: NDArray, span: NDArray, jumps: NDArray,
                              rays: NDArray, ratio: NDArray, streamed: ArrayLike,
                              slice_crossing: float, threshold: int, scale_of: int,
                              pixels: float, pixels_per_step: float,
                              plane_crossing: float = 0.0) -> NDArray:
        """(ranks,) each rank's render work seconds, uncorrected, of one candidate of
        :meth:`slowest_render_on_grid`'s (its threshold and scale indices, pixels and pixels
        per step), in the same compiled formula: what a rendered frame is set against."""
        work = np.empty(self.ranks)
        _candidate_work(np.ascontiguousarray(length, np.float64),
                        np.ascontiguousarray(span, np.float64),
                        np.ascontiguousarray(jumps, np.float64),
                        np.ascontiguousarray(rays, np.float64),
                        np.ascontiguousarray(ratio, np.float64), self._coefficient_table,
                        np.array(np.broadcast_to(streamed, (self.ranks,)), np.float64),
                        self._crossing_cost(slice_crossing, plane_crossing),
                        np.ones(self.ranks), int(threshold),
                        int(scale_of), float(pixels), float(pixels_per_step), work)
        return work

    def load_kernels(self) -> None:
        """Load :meth:`candidate_render_work`'s compiled kernel now, at set-up: the first frame
        a tuner learned from paid 3.3 ms for loading it (bonsai, 512², 2 ranks)."""
        ones = np.ones(self.ranks)
        self.candidate_render_work(ones[None], ones[None], ones[None], ones,
                                   ones[None, :, None], ones, 0.0, 0, 0, 1.0, 1.0)

    def _crossing_cost(self, slice_crossing: float, plane_crossing: float) -> NDArray:
        """(ranks,) what the view's slice and plane crossings add to each rank's sample."""
        coef = self._coefficient_table
        return crossing_cost(coef[7], coef[9], float(slice_crossing), float(plane_crossing))

    @functools.cached_property
    def _group_table(self) -> tuple[NDArray, float]:
        """Each rank's core group as 0..groups-1 and the cores per group (one group of all
        the cores where the ranks are not pinned)."""
        if not self.core_groups:
            return np.zeros(self.ranks, np.int64), float(self.cores)
        names, group_of = np.unique(np.asarray(self.core_groups), return_inverse=True)
        return group_of.astype(np.int64).ravel(), float(self.cores) / len(names)

    @functools.cached_property
    def _coefficient_table(self) -> NDArray:
        """(10, ranks) the render coefficients in field order."""
        return np.array([m.coefficients for m in self.render], np.float64).T.copy()

    def compositing_sections(self, stages: Sequence[Sequence[StageWork]], gather_bytes: float,
                             image_scale: ArrayLike) -> dict[str, NDArray]:
        """Seconds of each compositing stage (``stage0``...), their sum (``composite``) and
        the gather, at each image scale: ``stages[s][r]`` is rank r's work in stage s at
        scale 1, and bytes and pixels scale with the scale's square."""
        area = np.asarray(image_scale, np.float64) ** 2
        out: dict[str, NDArray] = {}
        comp = np.zeros_like(area)
        for s, works in enumerate(stages):
            partner_ratio, nbytes, pixels = (np.array(v, np.float64)[:, None] for v in zip(
                *((w.partner_ratio, w.nbytes, w.pixels) for w in works), strict=True))
            t = self.stage.predict(partner_ratio, nbytes * area, pixels * area).max(axis=0)
            out[f"stage{s}"] = t
            comp = comp + t
        out["composite"] = comp
        out["gather"] = self.gather.predict(gather_bytes * area) if self.ranks > 1 \
            else np.zeros_like(area)
        return out

    def sections_of(self, work: NDArray, compositing: Mapping[str, NDArray]
                    ) -> dict[str, NDArray]:
        """Seconds per section of candidates from the ranks' render work (:meth:`rank_work`)
        and their compositing (:meth:`compositing_sections`, one entry per candidate)."""
        per_rank = shared_finish(work, self.cores, self.threads, self.core_groups)
        out = {"render": per_rank.max(axis=0), "render_per_rank": per_rank, **compositing}
        out["frame"] = out["render"] + compositing["composite"] + compositing["gather"]
        return out

    def predict_sections(self, samples: ArrayLike, skipped: ArrayLike, rays: ArrayLike,
                         pixels: ArrayLike, stages: Sequence[Sequence[StageWork]],
                         gather_bytes: float, image_scale: ArrayLike = 1.0,
                         streamed: ArrayLike = 0.0, slice_crossing: float = 0.0,
                         jumps: ArrayLike = 0.0) -> dict[str, NDArray]:
        """Seconds per section (render, each stage, composite, gather, frame) for candidates:
        :meth:`rank_work`'s arguments, then :meth:`compositing_sections`'; ``image_scale``
        is a number for all candidates or one per candidate."""
        work = self.rank_work(samples, skipped, rays, pixels, streamed, slice_crossing, jumps)
        scale = np.broadcast_to(np.asarray(image_scale, np.float64), work.shape[1:])
        return self.sections_of(work, self.compositing_sections(stages, gather_bytes, scale))

    def to_dict(self) -> dict[str, Any]:
        return {"render": [asdict(m) for m in self.render], "stage": asdict(self.stage),
                "gather": asdict(self.gather), "meta": self.meta,
                "cores": None if math.isinf(self.cores) else self.cores,
                "threads": self.threads, "core_groups": list(self.core_groups),
                "device_kind": self.device_kind}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "<volume model>") -> ClusterFrameModel:
        try:
            return cls(tuple(RenderModel(**r) for r in d["render"]), StageModel(**d["stage"]),
                       GatherModel(**d["gather"]), dict(d.get("meta", {})),
                       float(d.get("cores") or math.inf), float(d.get("threads", 1.0)),
                       tuple(int(g) for g in d.get("core_groups", ())),
                       str(d.get("device_kind", "CPU")))  # models before it: CPU
        except (KeyError, TypeError) as exc:
            raise VolumeModelError(f"{where}: not a volume model ({exc})") from None


@nb.njit(cache=True)
def _candidate_work(length, span, jumps, rays, ratio, coef, streamed, crossing, correction, t,
                    s, px, per_step, work):  # pragma: no cover
    """:func:`render_seconds` of each rank for one candidate (threshold index ``t``, scale
    index ``s``, ``px`` pixels, ``per_step`` pixels per voxel of step) into ``work``;
    ``crossing[r]``: what the view's slice and plane crossings add to rank r's sample."""
    for r in range(rays.shape[0]):
        m = streamed[r]
        samples = length[t, r] * per_step * ratio[t, r, s]
        skipped = (span[t, r] - length[t, r]) * per_step
        work[r] = ((coef[0, r] * (1 - m) + coef[5, r] * m + crossing[r]) * samples
                   + (coef[1, r] * (1 - m) + coef[6, r] * m) * skipped
                   + coef[8, r] * (jumps[t, r] * px)
                   + coef[2, r] * (rays[r] * px) + coef[3, r] * px + coef[4, r]
                   ) * correction[r]


@nb.njit(cache=True)
def _slowest_render(length, span, jumps, rays, ratio, coef, streamed, crossing, correction,
                    threshold, scale_of, pixels, pixels_per_step, group_of, group_cores,
                    threads, after):  # pragma: no cover
    """:meth:`ClusterFrameModel.slowest_render_on_grid`, compiled: :func:`render_seconds` per
    rank and candidate, then :func:`shared_finish`'s slowest rank of each core group, in the
    same order of operations, then what follows the render at the candidate's scale."""
    ranks, n = rays.shape[0], threshold.shape[0]
    groups = group_of.max() + 1
    out = np.empty(n)
    work, ordered = np.empty(ranks), np.empty(ranks)
    for j in range(n):
        _candidate_work(length, span, jumps, rays, ratio, coef, streamed, crossing, correction,
                        threshold[j], scale_of[j], pixels[j], pixels_per_step[j], work)
        slowest = 0.0
        for g in range(groups):
            members = 0
            for r in range(ranks):  # insertion sort of the group's work: a few ranks
                if group_of[r] != g:
                    continue
                v, i = work[r], members
                while i > 0 and ordered[i - 1] > v:
                    ordered[i] = ordered[i - 1]
                    i -= 1
                ordered[i] = v
                members += 1
            if group_cores >= members * threads:  # nothing shared
                for k in range(members):
                    slowest = max(slowest, ordered[k] / threads)
                continue
            finish, previous = 0.0, 0.0
            for k in range(members):
                finish += (ordered[k] - previous) / min(threads, group_cores / (members - k))
                previous = ordered[k]
            slowest = max(slowest, finish)
        out[j] = slowest + after[scale_of[j]]
    return out
