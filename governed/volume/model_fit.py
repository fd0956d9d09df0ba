"""The volume renderer's frame-time model: calibration views, the fit, the predictor.

The per-rank model, after the per-process analytical model (HemoCell study): max over ranks
of the local render + Σ compositing stages + gather + upscale. It is calibrated by least
squares on frames from views and volumes that the governed path does not use
(:func:`volume_calibration_views`); :class:`VolumeModel` prices every candidate setting from
the per-frame workload probe. A rank's render work is fitted in the clock its record names
(:func:`work_seconds`: CPU seconds on a CPU device, kernel seconds on a GPU). Ranks that share
a machine's cores on a CPU device are modelled as sharing them (:func:`shared_cores`); on a GPU
they share nothing (models.core_sharing.shares_cores).
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from governed.volume.knobs import one_setting
from governed.volume.workload_probe import RankWorkload, nearest_threshold
from models.core_sharing import shares_cores
from models.rank_correction import RankCorrection
from models.simd_groups import GroupRatioFit, roughness_at
from models.volume_cost import (
    ClusterFrameModel,
    RenderModel,
    StageWork,
    VolumeModelError,
    fit_compositing,
    streamed_share,
)
from raytracer.camera import Camera
from raytracer.volume.distributed import (
    DistributedFrameRecord,
    DistributedRenderer,
    FrameSettings,
    RankTiming,
    work_clock,
)

#: Calibration views of a volume (the command, the viewer and the benchmark all take this many)
CALIBRATION_VIEWS = 8


def volume_calibration_views(radius: float, count: int = CALIBRATION_VIEWS, seed: int = 7
                             ) -> list[Camera]:
    """Views from random directions above and below the orbit plane, 2.2-3.4 radii out: the
    governed path (the cluster study's orbit in the XZ plane: Tkachev et al., "Prediction of
    Distributed Volume Visualization Performance to Support Render Hardware Acquisition")
    shares none of them."""
    rng = np.random.default_rng(seed)
    cams = []
    for _ in range(count):
        d = rng.normal(size=3)
        d[1] = math.copysign(max(abs(d[1]), 0.35 * np.linalg.norm(d)), d[1])
        d /= np.linalg.norm(d)
        eye = tuple(float(x) for x in d * radius * rng.uniform(2.2, 3.4))
        cams.append(Camera(eye, (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), 45.0))
    return cams


@dataclass
class CalibrationSample:
    """One calibration frame on rank 0: the probe's estimate and the measured record."""

    workload: RankWorkload
    settings: FrameSettings
    record: DistributedFrameRecord
    streamed: np.ndarray  # (ranks,) each brick's streamed share (models.volume_cost)


@dataclass(frozen=True)
class _CandidateGeometry:
    """What the volume model prices in a candidate set that does not change from frame to
    frame: each candidate's threshold index, rendered pixels, pixels per voxel of step and
    image scale, and its index among the distinct scales (compositing and the SIMD groups'
    excess depend on the scale alone)."""

    threshold: np.ndarray  # (candidates,) index into the probe's thresholds
    pixels: np.ndarray  # (candidates,)
    pixels_per_step: np.ndarray  # (candidates,)
    scale: np.ndarray  # (candidates,)
    scale_of: np.ndarray  # (candidates,) index into scales
    scales: np.ndarray  # (distinct scales,)
    index: dict[tuple[float, float, float], int]  # a candidate's (rate, scale, ert), rounded

    def index_of(self, settings: FrameSettings) -> int | None:
        """The candidate at ``settings`` (None: not one of these)."""
        return self.index.get(_setting_key(1.0 / settings.step, settings.image_scale,
                                           settings.ert_threshold))

    @classmethod
    def of(cls, knobs: Mapping[str, np.ndarray], thresholds: np.ndarray, width: int,
           height: int) -> _CandidateGeometry:
        rate = np.asarray(knobs["sampling_rate"], np.float64)
        scale = np.asarray(knobs["image_scale"], np.float64)
        ert = np.asarray(knobs["ert_threshold"], np.float64)
        threshold = nearest_threshold(thresholds, ert)
        pixels = width * height * scale**2
        scales, scale_of = np.unique(scale, return_inverse=True)
        index = {_setting_key(*k): j for j, k in enumerate(zip(
            *np.broadcast_arrays(rate, scale, ert), strict=True))}
        return cls(threshold, pixels, pixels * rate, scale, scale_of.ravel(), scales, index)


def _setting_key(rate: float, scale: float, ert: float) -> tuple[float, float, float]:
    """A setting as a lookup key: its knobs rounded past the float error of ``1 / (1 / r)``."""
    return round(float(rate), 9), round(float(scale), 9), round(float(ert), 9)


@dataclass
class RendererFit:
    """Rank 0: what the tuner learned of one renderer, kept while the renderer lives (a
    volume swapped out and back in keeps it): its SIMD group ratios, each rank's correction
    of the render model and, where it was calibrated, its calibration frames and each rank's
    render model fitted on them alone."""

    group_fit: GroupRatioFit
    correction: RankCorrection
    samples: list[CalibrationSample] = field(default_factory=list)
    render: tuple[RenderModel, ...] = ()

    @classmethod
    def new(cls, ranks: int) -> RendererFit:
        """What the tuner knows of a renderer it has not seen render."""
        return cls(GroupRatioFit(ranks), RankCorrection(ranks))


class VolumeModel:
    """Rank 0's predictor: the probe's per-rank workload + the calibrated per-rank model."""

    def __init__(self, model: ClusterFrameModel, finish_per_pixel: float, width: int,
                 height: int, thresholds: np.ndarray) -> None:
        self.model, self.finish_per_pixel = model, finish_per_pixel
        self.width, self.height = width, height
        self.thresholds = np.asarray(thresholds, np.float64)
        self.workload: RankWorkload | None = None
        self.stages: list[list[StageWork]] = []
        self.gather_bytes = 0.0
        self.spent = 0.0  # the frame's measured part: probe spent + the running overhead
        self.streamed: np.ndarray | float = 0.0  # each rank's streamed share, per volume
        # each rank's samples as its SIMD groups paid them over those taken, last frame
        self.group_ratio = np.ones(model.ranks)
        self.group_ratio_scale = 1.0  # the image scale that ratio was measured at
        # each rank's group ratio from the probe's roughness, fitted on the frames of the
        # current volume (the last frame's ratio stands in until a rank has one)
        self.group_fit = GroupRatioFit(model.ranks)
        # each rank's correction learned from the frames of the current volume
        self.correction = RankCorrection(model.ranks)
        self._geometry_key: tuple | None = None  # (knobs mapping, width, height) priced last
        self._geometry_cache: _CandidateGeometry | None = None
        # the workload, geometry and group ratios the candidates were last priced with (until
        # a frame's record teaches the model): a rendered candidate's work without pricing
        # it again
        self._priced: tuple[RankWorkload, _CandidateGeometry, np.ndarray] | None = None

    def use_record(self, record: DistributedFrameRecord) -> None:
        """Take the compositing work per stage (at scale 1) and each rank's group ratio (its
        samples as its SIMD groups paid them: the slowest lane sets a group's time) from the
        last frame's record: that ratio prices a rank the group fit has no frame for yet."""
        self.stages, self.gather_bytes = stage_work(record)
        self.group_ratio = np.array([r.group_ratio for r in record.ranks])
        self.group_ratio_scale = record.render_width / record.width
        self._priced = None  # the group ratios change

    def prepare(self, knobs: Mapping[str, np.ndarray]) -> None:
        """Lay out the geometry of candidates ``knobs`` (the tuner's grid) at this image size
        now, at set-up or a resize: the first frame that priced them paid 0.9 ms for it
        (bonsai, 540 candidates, 512²)."""
        self._geometry(knobs)

    def _geometry(self, knobs: Mapping[str, np.ndarray], keep: bool = True
                  ) -> _CandidateGeometry:
        """The candidates' geometry, cached for the last mapping priced with ``keep`` at this
        image size: the tuner prices the same candidate grid every frame, and only the
        workload and the compositing work change between frames. A one-off mapping (a
        frame's sections, a model check) is laid out without ``keep``, so that it does not
        evict the grid's (which the next frame then laid out again: 0.9 ms)."""
        key = self._geometry_key
        if key is not None and key[0] is knobs and key[1:] == (self.width, self.height):
            return self._geometry_cache
        g = _CandidateGeometry.of(knobs, self.thresholds, self.width, self.height)
        if keep:
            self._geometry_cache, self._geometry_key = g, (knobs, self.width, self.height)
        return g

    def _group_ratio(self, g: _CandidateGeometry) -> np.ndarray:
        """(thresholds, ranks, scales) each rank's group ratio at each probed threshold and
        candidate scale: fitted on the probe's roughness, else the last frame's carried."""
        return self.group_fit.table(self.workload.roughness, self.workload.probe_width,
                                    self.width * g.scales, self.group_ratio,
                                    self.width * self.group_ratio_scale)

    def _finish(self, g: _CandidateGeometry) -> np.ndarray:
        """The upscale to the display at each of the candidates' scales (none at full)."""
        return np.where(g.scales < 1.0, self.finish_per_pixel * self.width * self.height, 0.0)

    def _uncorrected_work(self, g: _CandidateGeometry) -> np.ndarray:
        """(ranks, candidates) work seconds of each rank's render, before its correction."""
        w = self.workload
        samples = (w.samples(g.threshold, g.pixels_per_step)
                   * self._group_ratio(g)[g.threshold, :, g.scale_of].T)
        return self.model.rank_work(samples, w.skipped(g.threshold, g.pixels_per_step),
                                    w.ray_counts(g.pixels), g.pixels, self.streamed,
                                    w.slice_crossing, w.jump_counts(g.threshold, g.pixels),
                                    w.plane_crossing)

    def uncorrected_rank_work(self, settings: FrameSettings) -> np.ndarray:
        """(ranks,) each rank's render work seconds at ``settings`` for the current workload,
        before its correction: what a frame's measured seconds are set against. A candidate
        the tuner just priced on this workload is read from that pricing (the governed loop
        learns from a frame rendered on a fresh probe right after it, before anything else
        changes the model); any other setting is priced on its own, apart from the
        candidates' cached geometry."""
        priced, w = self._priced, self.workload
        if priced is not None and priced[0] is w and priced[1] is self._geometry_cache \
                and (j := priced[1].index_of(settings)) is not None:
            g = priced[1]
            return self.model.candidate_render_work(
                w.length, w.span, w.jumps, w.rays, priced[2], self.streamed, w.slice_crossing,
                g.threshold[j], g.scale_of[j], g.pixels[j], g.pixels_per_step[j],
                w.plane_crossing)
        g = _CandidateGeometry.of(one_setting(settings), self.thresholds, self.width,
                                  self.height)
        return self._uncorrected_work(g)[:, 0]

    def sections(self, knobs: Mapping[str, np.ndarray], spent: float | None = None
                 ) -> dict[str, np.ndarray]:
        """Seconds per section (render, stages, gather, finish, frame) of each candidate; the
        frame's measured part is ``spent`` where given, else :attr:`spent`."""
        g = self._geometry(knobs, keep=False)
        work = self._uncorrected_work(g) * self.correction.factor[:, None]
        compositing = self.model.compositing_sections(self.stages, self.gather_bytes,
                                                      g.scales)
        out = self.model.sections_of(work, {k: v[g.scale_of] for k, v in compositing.items()})
        out["finish"] = self._finish(g)[g.scale_of]
        out["frame"] = out["render"] + self._after_render(g, compositing, spent)[g.scale_of]
        return out

    def _after_render(self, g: _CandidateGeometry, compositing: Mapping[str, np.ndarray],
                      spent: float | None) -> np.ndarray:
        """The seconds of a frame besides its render at each of the candidates' scales: the
        compositing, gather and upscale, and the frame's measured part (``spent`` where given,
        else :attr:`spent`), summed in one order for :meth:`sections` and the compiled pass."""
        return (compositing["composite"] + compositing["gather"] + self._finish(g)
                + (self.spent if spent is None else spent))

    def __call__(self, knobs: Mapping[str, np.ndarray], spent: float | None = None
                 ) -> np.ndarray:
        """Frame seconds of each candidate: :meth:`sections`' frame (``spent`` likewise), in
        one compiled pass over the candidates after the few per-scale sums (what the tuner
        asks after each probe: 540 candidates on bonsai, 60 -> 37 µs warm, and fewer NumPy
        calls to pay for in caches the frame's render just evicted)."""
        g = self._geometry(knobs)
        w = self.workload
        ratio = self._group_ratio(g)
        self._priced = (w, g, ratio)
        comp = self.model.compositing_sections(self.stages, self.gather_bytes, g.scales)
        after = self._after_render(g, comp, spent)
        return self.model.slowest_render_on_grid(w.length, w.span, w.jumps, w.rays, ratio,
                                                 self.streamed, w.slice_crossing, g.threshold,
                                                 g.scale_of, g.pixels, g.pixels_per_step,
                                                 self.correction.factor, after,
                                                 w.plane_crossing)


def group_observation(workload: RankWorkload, record: DistributedFrameRecord
                      ) -> tuple[np.ndarray, np.ndarray]:
    """What a rendered frame tells :class:`~models.simd_groups.GroupRatioFit`: each rank's
    probe roughness at the frame's threshold, carried to its rendered width, and the group
    ratio the caster counted."""
    t = int(nearest_threshold(workload.thresholds, record.settings.ert_threshold))
    return (roughness_at(workload.roughness[t], workload.probe_width, record.render_width),
            np.array([r.group_ratio for r in record.ranks]))


def stage_work(record: DistributedFrameRecord) -> tuple[list[list[StageWork]], float]:
    """Per stage and rank: partners, bytes and blended pixels normalised to scale 1."""
    area = (record.render_width * record.render_height) / float(record.width * record.height)
    n_stages = len(record.ranks[0].stages)
    max_partners = max((len(s.partners) for r in record.ranks for s in r.stages), default=1)
    stages = [[StageWork(len(r.stages[s].partners), max_partners,
                         (r.stages[s].bytes_sent + r.stages[s].bytes_received) / area,
                         r.stages[s].blended_pixels / area) for r in record.ranks]
              for s in range(n_stages)]
    gather = record.ranks[0].gather.bytes_received / area
    return stages, gather


def render_rows(samples: Sequence[CalibrationSample], rank: int, thresholds: np.ndarray
                ) -> tuple[list[float], ...]:
    """One rank's render-model rows: per frame the probe's samples (as the SIMD groups paid
    them: times the frame's group ratio), skipped lattice positions and rays at the frame's
    knobs, its rendered pixels, the probe's jumps over empty space, and the measured work
    seconds of the render (:func:`work_seconds`)."""
    est_s, est_k, est_r, px, est_j, sec = [], [], [], [], [], []
    for s in samples:
        rec = s.record
        pixels = rec.render_width * rec.render_height
        idx = _threshold_index(s, thresholds)
        w = s.workload
        est_s.append(w.length[idx, rank] / s.settings.step * pixels
                     * rec.ranks[rank].group_ratio)  # as the SIMD groups pay them
        est_k.append((w.span[idx, rank] - w.length[idx, rank]) / s.settings.step * pixels)
        est_r.append(w.rays[rank] * pixels)
        px.append(pixels)
        est_j.append(_probed_jumps(s, rank, idx))
        sec.append(work_seconds(rec.ranks[rank]))
    return est_s, est_k, est_r, px, est_j, sec


def _threshold_index(sample: CalibrationSample, thresholds: np.ndarray) -> int:
    """The probed threshold a calibration frame's termination knob is priced at."""
    return int(nearest_threshold(thresholds, sample.settings.ert_threshold))


def _probed_jumps(sample: CalibrationSample, rank: int, threshold_index: int) -> float:
    """The probe's jumps over empty space of one rank in a calibration frame, at its
    threshold (:func:`_threshold_index`) and rendered pixels."""
    rec = sample.record
    return float(sample.workload.jumps[threshold_index, rank] * rec.render_width
                 * rec.render_height)


#: Which RankTiming field each work clock (raytracer/volume/distributed.py work_clock) reads
CLOCK_FIELDS = {"cpu": "cpu_seconds", "kernel": "kernel_seconds", "wall": "render_seconds"}


def work_seconds(timing: RankTiming) -> float:
    """A rank's render work as the model fits it: the seconds of the clock its record names
    (``timing.work_clock``: CPU seconds on a CPU device, kernel event seconds on a GPU, wall
    where a CPU device took no CPU time). A record without one (from before the clock was
    recorded: CPU devices) is read by the CPU rule: CPU seconds, wall where none were taken."""
    clock = getattr(timing, "work_clock", "") or work_clock("CPU", timing.cpu_seconds)
    if clock not in CLOCK_FIELDS:
        raise VolumeModelError(f"rank {getattr(timing, 'rank', '?')}: unknown work clock "
                               f"{clock!r} (expected one of {', '.join(CLOCK_FIELDS)})")
    return float(getattr(timing, CLOCK_FIELDS[clock]))


def view_crossings(samples: Sequence[CalibrationSample]) -> tuple[list[float], list[float]]:
    """Each calibration frame's slice and plane crossing (its view's, the same for every
    rank), as the render models are fitted on them."""
    return ([s.workload.slice_crossing for s in samples],
            [s.workload.plane_crossing for s in samples])


def counted_render_models(samples: Sequence[CalibrationSample]) -> tuple[RenderModel, ...]:
    """Per rank, the render model fitted as :func:`fit_volume_model` fits it but on the
    caster's own counts of each calibration frame (samples as the SIMD groups paid them,
    skipped positions, rays) instead of the probe's estimates: priced on the counts of the
    frames it predicts, it shows what the model's form alone misses, without the probe's.
    The caster does not count its jumps over empty space: those are the probe's."""
    if not samples:
        raise VolumeModelError("no calibration frames to fit the counted render models on")
    ranks = len(samples[0].record.ranks)
    pixels = [s.record.render_width * s.record.render_height for s in samples]
    crossing, plane = view_crossings(samples)  # the view's, not counts
    threshold = [_threshold_index(s, s.workload.thresholds) for s in samples]
    models = []
    for r in range(ranks):
        timings = [s.record.ranks[r] for s in samples]
        jumps = [_probed_jumps(s, r, t) for s, t in zip(samples, threshold, strict=True)]
        models.append(RenderModel.fit([t.samples * t.group_ratio for t in timings],
                                      [t.skipped for t in timings], [t.rays for t in timings],
                                      pixels, [work_seconds(t) for t in timings],
                                      [s.streamed[r] for s in samples], crossing, jumps,
                                      plane))
    return tuple(models)


@dataclass(frozen=True)
class CoreSharing:
    """How the ranks share cores, as the model prices it (:func:`models.volume_cost.
    shared_finish`): the cores they share, each rank's threads, and each rank's group of
    pinned cores (() where the OS moves ranks between all the cores); ``device_kind``: the
    ranks' OpenCL device kind, which turns all of it off on any but a CPU device
    (:class:`~models.volume_cost.ClusterFrameModel`)."""

    cores: float = math.inf
    threads: float = 1.0
    groups: tuple[int, ...] = ()
    device_kind: str = "CPU"


def fit_render_models(samples: Sequence[CalibrationSample], ranks: int, thresholds: np.ndarray
                      ) -> tuple[RenderModel, ...]:
    """Each rank's render model fitted on the probe's estimates of ``samples``."""
    crossing, plane = view_crossings(samples)
    models = []
    for r in range(ranks):
        est_s, est_k, est_r, px, est_j, sec = render_rows(samples, r, thresholds)
        models.append(RenderModel.fit(est_s, est_k, est_r, px, sec,
                                      [s.streamed[r] for s in samples], crossing, est_j,
                                      plane))
    return tuple(models)


def fit_volume_model(samples: Sequence[CalibrationSample], ranks: int, width: int, height: int,
                     thresholds: np.ndarray, sharing: CoreSharing | None = None
                     ) -> tuple[ClusterFrameModel, float]:
    """Per-rank render models (seconds of work: :func:`work_seconds`), the joint compositing
    model and the upscale cost; ``sharing``: how the ranks share the machine's cores (none by
    default) and their device kind (off on a GPU: models.core_sharing.shares_cores).

    One model per rank: a single model fitted on all ranks' rows priced random knobs on the
    validation volumes a little better (2 ranks at 256², four runs: 12.8-15.7 % against
    15.1-15.5 %), but the governed frames on bonsai's held-out orbit worse (8.6-11.5 %
    against 5.9-7.8 %): each brick's own costs matter where the tuner holds the target."""
    sharing = sharing or CoreSharing()
    renders = fit_render_models(samples, ranks, thresholds)
    ratio, nbytes, blended, gbytes, comp = [], [], [], [], []
    for s in samples:
        rec = s.record
        st, g = stage_work(rec)
        area = (rec.render_width * rec.render_height) / float(rec.width * rec.height)
        ratio.append(sum(max(w.partner_ratio for w in ws) for ws in st))
        nbytes.append(sum(max(w.nbytes for w in ws) for ws in st) * area)
        blended.append(sum(max(w.pixels for w in ws) for ws in st) * area)
        gbytes.append(g * area)
        composite = rec.frame_seconds - rec.finish_seconds - rec.render_max
        comp.append(max(composite, 1e-6))
    stage, gather = fit_compositing(ratio, nbytes, blended, gbytes, comp)
    up = [(s.record.finish_seconds, s.record.width * s.record.height) for s in samples
          if s.settings.image_scale < 1.0]
    finish = float(np.median([t / p for t, p in up])) if up else 0.0
    return ClusterFrameModel(renders, stage, gather,
                             meta={"ranks": ranks, "frames": len(samples),
                                   "width": width, "height": height},
                             cores=sharing.cores, threads=sharing.threads,
                             core_groups=sharing.groups, device_kind=sharing.device_kind), finish


DEFAULT_CORE_CACHE = 1 << 20  # bytes: a per-core L2 where the OS does not say


def core_cache_bytes(sysfs: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int:
    """The largest per-core (level <= 2) data cache of this machine's CPU 0, from sysfs; 1 MiB
    where the OS does not say."""
    sizes = []
    for index in sysfs.glob("index*"):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if level <= 2 and kind in ("Data", "Unified") and size[:-1].isdigit():
            unit = {"K": 1 << 10, "M": 1 << 20}.get(size[-1])
            if unit:
                sizes.append(int(size[:-1]) * unit)
    return max(sizes, default=DEFAULT_CORE_CACHE)


def shared_cores(renderer: DistributedRenderer) -> CoreSharing:
    """Collective: how ``renderer``'s ranks share their machines' cores. Ranks on one machine
    share its cores (processor sharing; with a core per rank thread or more it changes
    nothing); ranks pinned to the same cores of a machine share only those. The device kind
    is the ranks' (CPU only where every rank renders on a CPU device): on any other the model
    turns the sharing off."""
    node = renderer.node
    gathered = renderer.comm.allgather((socket.gethostname(), node.pinned,
                                        renderer.device_kind))
    places = [(host, pinned) for host, pinned, _ in gathered]
    kinds = {kind for _, _, kind in gathered}
    kind = "CPU" if kinds == {"CPU"} else "/".join(sorted(kinds - {"CPU"}))
    groups: tuple[int, ...] = ()
    if all(pinned for _, pinned in places):
        names = {place: i for i, place in enumerate(dict.fromkeys(places))}
        groups = tuple(names[place] for place in places)
    return CoreSharing(float(node.cores) * renderer.size / node.ranks, float(node.threads),
                       groups, kind)


def render_cache_bytes(renderer: DistributedRenderer) -> int:
    """The cache a brick's working set is set against (models.volume_cost.streamed_share):
    on a CPU device a core's own cache (:func:`core_cache_bytes`: each rank's threads run on
    their cores), elsewhere the device's global memory cache as OpenCL reports it (the brick
    lives in device memory and its reads pass that cache, not a core's L2); 0 where the device
    does not say (:func:`streamed_shares` then leaves the term off)."""
    if shares_cores(renderer.device_kind):
        return core_cache_bytes()
    return renderer.device_cache_bytes


def streamed_shares(working_set_bytes: np.ndarray, cache_bytes: int) -> np.ndarray:
    """Each brick's streamed share against ``cache_bytes`` (models.volume_cost.
    streamed_share); 0 for every brick where no cache size is known (a device that reports
    none): one cost per sample, cached and streamed alike, rather than a guessed size."""
    if cache_bytes <= 0:
        return np.zeros(np.shape(working_set_bytes))
    return streamed_share(working_set_bytes, cache_bytes)
