"""Ray-tracing frame time: the §4.3 instruction counts fed to the Hong–Kim model.

The counts and equations of Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing using an
Analytical GPU Architecture Model" (§4.3).

Each phase (primary rays, shadow rays, AO rays, shading) is one kernel launch with one
thread per pixel; its per-thread counts come from the kernel's per-loop instruction counts
(``LoopCounts``, later read from PTX) and the probe's per-pixel ``Workload``:

- primary: ``i_c = i_ct p_t + i_ci p_i + i_cco``; ``i_t = (i_mt p_t + i_mi p_i + i_mco)(1 - m^2)``;
  ``i_mu = i_t (1 - m)``; ``i_mc = i_t m``.
- ao (``a_r > 0``): ``i_c = i_ct a_t a_r + i_ci a_i a_r + h i_cco``, plus ``h a_r i_cco_ray``
  (each ray's set-up outside traversal, the counts' ``ao_ray``) where the device issues it in
  order; an out-of-order core (``DeviceProfile.out_of_order``: CPUs) builds each ray while the
  ray before it is traversed, so there it adds no time (validation: with it priced, Intel's
  held-out frame error was 11-12 %, without 8-9 %);
  ``a_ca = 1 - min(1, 2^-((a_t + p_t)/23 - 1))``; ``a_m = miss (i_mt a_t a_r + a_i i_mi a_r / 2)``
  with ``miss = 1 - (1 - a_ca) m^2``: a node fetch misses the cache unless the paper's depth
  estimate and the view's coherence both keep it (independently; ``m^2`` is the primary
  equation's cache share). The paper prints ``a_ca`` alone, which is 0 for every view with a
  wide BVH (shallow traversals); then incoherent rays (dragon, m = 0.25) cost what coherent
  ones (sibenik, m = 0.98) do, and the held-out error was 24 % instead of 17 %;
  ``i_mu = a_m + h i_mco``; ``i_mc = 0``. The paper prints ``a_w t_v`` in ``i_c`` and ``t_v`` in
  ``a_m``; here both use ``a_i`` (the probe measures ``a_i = a_w t_v``, see Workload).
  ``a_t`` and ``a_i`` are per ray of each SIMD group's slowest lane at ``a_r`` rays a pixel
  (:meth:`Workload.ao_per_ray`: the lane mean plus the slowest lane's excess, which the probe
  measures at two rays and which shrinks as ``1/sqrt(a_r)``).
  With the AO filter (the renderer's default: the AO phase's second kernel, which spreads the
  rays' sums over neighbours on the same surface), the ``ao_filter`` counts' constant, times
  ``h``, its memory coalesced (each tap a row of neighbours).
- shadow (if on): the ao equations with ``a_r = 1`` and ``s_t, s_i`` for ``a_t, a_i``.
- shade: constant ``i_cco`` and ``i_mco`` of "shade_phong" or "shade_flat" (fallback "shade"),
  memory split like the constant term of the primary equation (the primary one with
  ``p_t = p_i = 0``), times ``h``.

``h`` is the hit fraction: secondary rays and lit shading run only where the primary ray hit;
a missed pixel takes a short exit path that the loop counts do not describe. With an
application calibration (:class:`~models.app_calibration.AppCalibration`, fitted on measured
frames) each phase becomes ``scale * model + offset * pixels + miss * missed_pixels + launch``
(the miss-pixel term prices those exits, the launch term a kernel launch); without one the bare
analytical model is returned.

Occupancy: each launch keeps ``min(max_blocks_per_core, ceil(blocks / cores))`` work-groups
resident per core, the profile's one figure for every kernel, unless ``active_blocks`` (phase
-> work-groups resident per core, e.g. from the compiler's register and shared-memory use,
:attr:`AppCalibration.occupancy`) names the phase: then ``min(that, ceil(blocks / cores))``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from models.app_calibration import AppCalibration
from models.device_profile import DeviceProfile
from models.hong_kim import KernelLaunch, active_blocks_per_core, predict_cycles, predict_seconds
from models.workload import Workload

# One kernel launch each, in launch order. models imports nothing of the ray tracer, so this is
# the ray tracer's phase registry (raytracer.mesh.phases) written again; governed.mesh refuses to
# import if the two differ, and tests/test_raytrace_cost.py checks it.
PHASES = ("primary", "shadow", "ao", "shade")
AO_CACHE_DEPTH = 23.0  # the constant of Ganestam & Doggett's a_ca equation


@dataclass(frozen=True)
class LoopCounts:
    """Per-loop instruction counts of one kernel (Table 5): per traversal, per test, constant."""

    i_ct: float = 0.0  # compute instructions per BVH traversal step
    i_ci: float = 0.0  # compute instructions per leaf test (up to 4 ray-triangle tests)
    i_cco: float = 0.0  # constant compute instructions
    i_mt: float = 0.0  # memory instructions per traversal step
    i_mi: float = 0.0  # memory instructions per leaf test
    i_mco: float = 0.0  # constant memory instructions

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"LoopCounts.{f.name} must be finite and >= 0, got {value}")


KernelCounts = Mapping[str, LoopCounts]
"""Phase name ("primary", "shadow", "ao", "shade_phong", "shade_flat" or "shade") -> counts."""


@dataclass(frozen=True)
class PhaseInstructions:
    """Per-thread instruction counts of one phase kernel: the Hong–Kim inputs."""

    compute: float  # i_c
    coal: float  # i_mc
    uncoal: float  # i_mu


def _lookup(counts: KernelCounts, key: str) -> LoopCounts:
    if key not in counts:
        raise ValueError(f"kernel counts have no {key!r} phase (have: {', '.join(counts)})")
    return counts[key]


def _shade_counts(counts: KernelCounts, phong: bool) -> LoopCounts:
    key = "shade_phong" if phong else "shade_flat"
    return counts[key] if key in counts else _lookup(counts, "shade")


def _coherent(lc: LoopCounts, w: Workload, p_t: float, p_i: float) -> PhaseInstructions:
    """Primary-ray equations: loop memory cut by the cache (1 - m^2), split by coalescing m."""
    i_t = (lc.i_mt * p_t + lc.i_mi * p_i + lc.i_mco) * (1.0 - w.m * w.m)
    compute = lc.i_ct * p_t + lc.i_ci * p_i + lc.i_cco
    return PhaseInstructions(compute=compute, coal=i_t * w.m, uncoal=i_t * (1.0 - w.m))


def _shade(counts: KernelCounts, w: Workload, phong: bool) -> PhaseInstructions:
    """Shading counts: the lit-surface path runs only where the primary ray hit (the sky
    path of missed pixels is a few instructions, left to the calibrated offset)."""
    full = _coherent(_shade_counts(counts, phong), w, 0.0, 0.0)
    h = w.hit_fraction
    return PhaseInstructions(full.compute * h, full.coal * h, full.uncoal * h)


def _cache_miss(steps: ArrayLike, p_t: float) -> ArrayLike:
    """a_ca: share of secondary-ray node fetches missing the cache, from traversal depth."""
    return 1.0 - np.minimum(1.0, 2.0 ** (-((steps + p_t) / AO_CACHE_DEPTH - 1.0)))


def _secondary_miss(steps: ArrayLike, p_t: float, coherence: float) -> ArrayLike:
    """Share of secondary-ray fetches that miss: kept only if both the depth estimate (a_ca)
    and the view's coherence keep them, ``1 - (1 - a_ca) m^2``."""
    return 1.0 - (1.0 - _cache_miss(steps, p_t)) * coherence * coherence


def _secondary_counts(
    lc: LoopCounts,
    steps: ArrayLike,
    tests: ArrayLike,
    p_t: float,
    rays: ArrayLike,
    per_ray: LoopCounts | None = None,
    hit_fraction: float = 1.0,
    coherence: float = 0.0,
) -> tuple[ArrayLike, ArrayLike]:
    """(i_c, i_mu) of a secondary-ray phase for ``rays`` rays per pixel (scalar or array).

    The kernel's constant and ``per_ray`` (the instructions spent per secondary ray outside
    traversal: ray generation) are paid only by pixels whose primary ray hit; missed pixels
    leave at once (the calibration's miss-pixel term).
    """
    compute = lc.i_ct * steps * rays + lc.i_ci * tests * rays + lc.i_cco * hit_fraction
    miss = _secondary_miss(steps, p_t, coherence)
    a_m = miss * (lc.i_mt * steps * rays + tests * lc.i_mi * rays / 2.0)
    if per_ray is not None:
        compute = compute + per_ray.i_cco * hit_fraction * rays
        a_m = a_m + per_ray.i_mco * hit_fraction * rays
    return compute, a_m + lc.i_mco * hit_fraction


def _shadow_counts(counts: KernelCounts, w: Workload) -> tuple[ArrayLike, ArrayLike]:
    """(i_c, i_mu) of the shadow phase: one ray per hit pixel."""
    return _secondary_counts(_lookup(counts, "shadow"), w.s_t, w.s_i, w.p_t, 1.0,
                             hit_fraction=w.hit_fraction, coherence=w.m)


def _ao_counts(counts: KernelCounts, w: Workload, rays: ArrayLike,
               out_of_order: bool = False, filtered: bool = True
               ) -> tuple[ArrayLike, float, ArrayLike]:
    """(i_c, i_mc, i_mu) of the AO phase, including the per-AO-ray constant where counted and
    the device issues it (not ``out_of_order``: there the kernel builds each ray while the one
    before it is traversed) and, ``filtered``, the filter kernel's constant where counted; the
    steps and tests per ray of the slowest lane at that many rays a pixel
    (:meth:`Workload.ao_per_ray`)."""
    steps, tests = w.ao_per_ray(rays)
    per_ray = None if out_of_order else counts.get("ao_ray")
    compute, uncoal = _secondary_counts(
        _lookup(counts, "ao"), steps, tests, w.p_t, rays, per_ray, w.hit_fraction, w.m)
    spread = counts.get("ao_filter") if filtered else None
    if spread is None:
        return compute, 0.0, uncoal
    h = w.hit_fraction
    return compute + spread.i_cco * h, spread.i_mco * h, uncoal


def phase_instructions(
    counts: KernelCounts, workload: Workload, ao_rays: int, shadows: bool, phong: bool,
    out_of_order: bool = False, ao_filter: bool = True,
) -> dict[str, PhaseInstructions]:
    """Per-thread counts of each phase that runs with these knobs (Ganestam & Doggett §4.3), on
    a device that is ``out_of_order`` or not (:attr:`DeviceProfile.out_of_order`), the AO
    filtered or not (``ao_filter``)."""
    w = workload
    out = {"primary": _coherent(_lookup(counts, "primary"), w, w.p_t, w.p_i)}
    if shadows:
        c, mu = _shadow_counts(counts, w)
        out["shadow"] = PhaseInstructions(compute=float(c), coal=0.0, uncoal=float(mu))
    if ao_rays > 0:
        c, mc, mu = _ao_counts(counts, w, float(ao_rays), out_of_order, ao_filter)
        out["ao"] = PhaseInstructions(compute=float(c), coal=float(mc), uncoal=float(mu))
    out["shade"] = _shade(counts, w, phong)
    return out


ActiveBlocks = Mapping[str, int]
"""Phase name ("primary", "shadow", "ao", "shade") -> work-groups resident per core."""


def resident_blocks(profile: DeviceProfile, blocks: int, phase: str,
                    active_blocks: ActiveBlocks | None = None) -> int:
    """Work-groups of ``phase`` resident per core: ``min(active_blocks[phase], ceil(blocks /
    cores))`` where the mapping names the phase, else ``min(max_blocks_per_core, ...)``."""
    if active_blocks is None or phase not in active_blocks:
        return active_blocks_per_core(profile, blocks)
    limit = int(active_blocks[phase])
    if limit < 1:
        raise ValueError(f"active_blocks[{phase!r}] must be >= 1, got {limit}")
    return min(limit, math.ceil(blocks / profile.cores))


def _check_launch(workload: Workload, threads_per_block: int) -> int:
    """Validate the launch shape and return the number of blocks, ceil(pixels / block)."""
    if threads_per_block < 1:
        raise ValueError(f"threads_per_block must be >= 1, got {threads_per_block}")
    if workload.pixels < 1:
        raise ValueError(f"workload.pixels must be >= 1, got {workload.pixels}")
    return math.ceil(workload.pixels / threads_per_block)


def _calibrated(calibration: AppCalibration | None, phase: str, seconds: Any,
                workload: Workload) -> Any:
    """Apply the calibrated correction of a phase: ``scale * seconds + offset * pixels +
    miss * missed_pixels + launch``.

    The scale absorbs what Hong–Kim leaves out on a device; the offset is a per-pixel cost the
    instruction counts miss, the miss term the exit path of pixels whose primary ray missed,
    the launch term the cost of one kernel launch.
    """
    if calibration is None:
        return seconds
    missed = (1.0 - workload.hit_fraction) * workload.pixels
    return calibration.apply(phase, seconds, workload.pixels, missed)


def predict_phase_seconds(
    profile: DeviceProfile,
    counts: KernelCounts,
    workload: Workload,
    ao_rays: int,
    shadows: bool,
    phong: bool,
    threads_per_block: int = 64,
    calibration: AppCalibration | None = None,
    active_blocks: ActiveBlocks | None = None,
) -> dict[str, float]:
    """Predicted seconds of each phase ("primary", "shadow", "ao", "shade"; 0.0 if off); with
    a ``calibration``, on the profile with the device figures it fitted; ``active_blocks``:
    work-groups resident per core of the phases it names (see the module doc)."""
    if ao_rays < 0:
        raise ValueError(f"ao_rays must be >= 0, got {ao_rays}")
    if calibration is not None:
        profile = calibration.model_profile(profile)
    blocks = _check_launch(workload, threads_per_block)
    out = dict.fromkeys(PHASES, 0.0)
    for phase, ins in phase_instructions(counts, workload, ao_rays, shadows, phong,
                                         profile.out_of_order).items():
        launch = KernelLaunch(
            compute=ins.compute,
            coal=ins.coal,
            uncoal=ins.uncoal,
            threads_per_block=threads_per_block,
            blocks=blocks,
            active_blocks=resident_blocks(profile, blocks, phase, active_blocks),
        )
        out[phase] = _calibrated(
            calibration, phase, predict_cycles(profile, launch).seconds, workload
        )
    return out


def predict_frame_seconds(
    profile: DeviceProfile,
    counts: KernelCounts,
    workload: Workload,
    ao_rays: int,
    shadows: bool,
    phong: bool,
    threads_per_block: int = 64,
    calibration: AppCalibration | None = None,
    active_blocks: ActiveBlocks | None = None,
) -> float:
    """Predicted seconds of the whole frame: the sum of its phases."""
    phases = predict_phase_seconds(
        profile, counts, workload, ao_rays, shadows, phong, threads_per_block, calibration,
        active_blocks,
    )
    return sum(phases.values())


@dataclass(frozen=True)
class CandidatePhases:
    """Each candidate's seconds per phase before per-phase factors: what a frame's search
    prices, and what stays the same while the workload does (only the factors move)."""

    primary: float
    shade: NDArray[np.float64]
    shadow: NDArray[np.float64]
    ao: NDArray[np.float64]

    def total(self, phase_factors: Mapping[str, float] | None = None) -> NDArray[np.float64]:
        """Each candidate's frame seconds, each phase scaled by its factor (absent: 1): one
        product with the phases' table (a search asks every frame, after a render that
        evicted the caches, where each NumPy call costs tens of µs). ``np.dot``, not ``@``:
        with the caches evicted, 14 against 31 µs for 130 candidates (median of 200)."""
        factors = phase_factors or {}
        total = np.dot(np.array([factors.get(p, 1.0) for p in PHASES]), self._table)
        return total.reshape(np.shape(self.shade))

    @functools.cached_property
    def _table(self) -> NDArray[np.float64]:
        """(phases, candidates) each phase's seconds, in :data:`PHASES` order."""
        shape = np.shape(self.shade)
        return np.stack([np.broadcast_to(np.asarray(getattr(self, p), np.float64), shape)
                         for p in PHASES]).reshape(len(PHASES), -1)

    def at(self, index: int) -> dict[str, float]:
        """Candidate ``index``'s seconds per phase (what :func:`predict_phase_seconds` gives)."""
        return {"primary": float(self.primary), "shadow": float(self.shadow[index]),
                "ao": float(self.ao[index]), "shade": float(self.shade[index])}


def candidate_phase_seconds(
    profile: DeviceProfile,
    counts: KernelCounts,
    workload: Workload,
    ao_rays: ArrayLike,
    shadows: ArrayLike,
    phong: ArrayLike,
    threads_per_block: int = 64,
    calibration: AppCalibration | None = None,
    active_blocks: ActiveBlocks | None = None,
) -> CandidatePhases:
    """The phases of many knob candidates at once (broadcast arrays).

    One Hong–Kim evaluation for everything: the knob-independent launches (primary, both
    shade variants, shadow) and AO once per distinct ray count (the controller's hot path),
    filtered as the renderer's candidates are. ``active_blocks``: work-groups resident per
    core of the phases it names.
    """
    a_r, shadow_on, phong_on = np.broadcast_arrays(
        np.asarray(ao_rays, dtype=np.float64),
        np.asarray(shadows, dtype=bool),
        np.asarray(phong, dtype=bool),
    )
    if np.any(a_r < 0):
        raise ValueError("ao_rays must be >= 0")
    if calibration is not None:
        profile = calibration.model_profile(profile)
    blocks = _check_launch(workload, threads_per_block)
    w = workload
    fixed = {"primary": _coherent(_lookup(counts, "primary"), w, w.p_t, w.p_i)}
    if phong_on.any():
        fixed["phong"] = _shade(counts, w, True)
    if not phong_on.all():
        fixed["flat"] = _shade(counts, w, False)
    if shadow_on.any():
        c, mu = _shadow_counts(counts, w)
        fixed["shadow"] = PhaseInstructions(float(c), 0.0, float(mu))
    ao_on = a_r > 0
    rays, where = np.unique(a_r, return_inverse=True)
    c_ao, mc_ao, mu_ao = (_ao_counts(counts, w, rays, profile.out_of_order) if ao_on.any()
                          else (rays * 0, 0.0, rays * 0))
    k = len(fixed)
    compute = np.concatenate([[i.compute for i in fixed.values()], np.broadcast_to(c_ao,
                                                                                   rays.shape)])
    coal = np.concatenate([[i.coal for i in fixed.values()], np.full(rays.shape, mc_ao)])
    uncoal = np.concatenate([[i.uncoal for i in fixed.values()], np.broadcast_to(mu_ao,
                                                                                 rays.shape)])
    phase_of = {"primary": "primary", "phong": "shade", "flat": "shade", "shadow": "shadow"}
    resident = None
    if active_blocks:  # one figure per launch: the fixed ones, then AO at each ray count
        resident = np.array([resident_blocks(profile, blocks, phase_of[key], active_blocks)
                             for key in fixed]
                            + [resident_blocks(profile, blocks, "ao", active_blocks)]
                            * rays.size, np.float64)
    secs = predict_seconds(profile, compute, coal, uncoal, 0.0, threads_per_block, blocks,
                           resident)
    one = {key: float(_calibrated(calibration, phase_of[key], float(secs[i]), w))
           for i, key in enumerate(fixed)}
    shade = np.where(phong_on, one.get("phong", 0.0), one.get("flat", 0.0))
    shadow = np.where(shadow_on, one.get("shadow", 0.0), 0.0)
    ao = np.zeros(a_r.shape)
    if ao_on.any():
        ao_s = np.asarray(_calibrated(calibration, "ao", secs[k:], w))
        ao = np.where(ao_on, ao_s[where.reshape(a_r.shape)], 0.0)
    return CandidatePhases(one["primary"], shade, shadow, ao)


def predict_frame_seconds_batch(
    profile: DeviceProfile,
    counts: KernelCounts,
    workload: Workload,
    ao_rays: ArrayLike,
    shadows: ArrayLike,
    phong: ArrayLike,
    threads_per_block: int = 64,
    calibration: AppCalibration | None = None,
    phase_factors: Mapping[str, float] | None = None,
    active_blocks: ActiveBlocks | None = None,
) -> NDArray[np.float64]:
    """``predict_frame_seconds`` for many knob candidates at once (broadcast arrays):
    :func:`candidate_phase_seconds`, each phase scaled by ``phase_factors`` (per-phase
    feedback; absent phases: 1)."""
    return candidate_phase_seconds(profile, counts, workload, ao_rays, shadows, phong,
                                   threads_per_block, calibration, active_blocks
                                   ).total(phase_factors)
