"""The distributed volume renderer held at a target frame time by the same Tuner as the ray tracer.

Per frame (collective; the tuner lives on rank 0)::

    rank 0: probe the view (block grid, per-brick termination) ─► per-rank samples and rays
            for every candidate ─► per-rank model (seed 004): max over ranks of the local
            render + Σ compositing stages + gather + upscale ─► Tuner chooses the knobs
    share the frame's state (camera, target, knobs: one FrameSync broadcast) ─► every rank
    renders its brick ─► composite ─► gather ─► rank 0 observes its frame time (probe +
    choice + render + composite + gather + upscale)

Knobs: sampling rate (samples per voxel, continuous: step = 1 / rate), image scale and the
early-termination threshold. Which setting looks best is measured, not assumed: a sweep of
each knob on a calibration view scores 1 − SSIM against the full-quality frame, and the
tuner maximizes minus the summed losses. The per-rank model is calibrated by least squares
on frames from views and volumes that the governed path does not use.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune import CONTROLLERS, FixedController, FloatKnob, KnobSpace, PIController, Tuner
from autotune.image_quality import psnr, ssim
from models.volume_cost import ClusterFrameModel, RenderModel, StageWork, fit_compositing
from raytracer.camera import Camera
from raytracer.volume.distributed import (
    DistributedRenderer,
    FrameRecord,
    FrameResult,
    FrameSettings,
)
from raytracer.volume.frame_sync import DONE, FRAME, FrameState, FrameSync
from raytracer.volume.tuning.workload_probe import (
    BlockGrid,
    RankWorkload,
    brick_boxes,
    probe_workload,
)

RATES = (0.25, 2.0, 36)  # samples per voxel: low, high, levels
SCALES = (0.5, 1.0, 5)
ERT = (0.95, 1.0, 3)
BEST = FrameSettings(step=1.0 / RATES[1], image_scale=SCALES[1], ert_threshold=ERT[1])
CONTROLLER_NAMES = tuple(CONTROLLERS)  # what a shared frame state's controller index names


def knob_space(losses: QualityLosses | None = None) -> KnobSpace:
    """The volume renderer's knobs, worst look first; quality from measured losses if given."""
    knobs = [FloatKnob("sampling_rate", *RATES[:2], levels=RATES[2]),
             FloatKnob("image_scale", *SCALES[:2], levels=SCALES[2], weight=2.0),
             FloatKnob("ert_threshold", *ERT[:2], levels=ERT[2], weight=0.5)]
    return KnobSpace(knobs, quality=losses.quality if losses is not None else None)


def settings_of(knobs: dict[str, Any]) -> FrameSettings:
    return FrameSettings(step=1.0 / float(knobs["sampling_rate"]),
                         image_scale=float(knobs["image_scale"]),
                         ert_threshold=float(knobs["ert_threshold"]))


@dataclass
class QualityLosses:
    """1 − SSIM against the full-quality frame along each knob (the others at their best)."""

    sweeps: dict[str, tuple[np.ndarray, np.ndarray]]  # knob -> (values, losses)

    def quality(self, c: dict[str, np.ndarray]) -> np.ndarray:
        total = 0.0
        for name, (values, losses) in self.sweeps.items():
            total = total + np.interp(np.asarray(c[name], np.float64), values, losses)
        return -np.asarray(total, np.float64)

    def to_dict(self) -> dict[str, Any]:
        return {k: {"values": v.tolist(), "losses": loss.tolist()}
                for k, (v, loss) in self.sweeps.items()}


def to_display(rgba: np.ndarray) -> np.ndarray:
    """Premultiplied RGBA over black as RGB in [0, 1] (what the user sees)."""
    return np.clip(rgba[..., :3], 0.0, 1.0)


def calibration_views(radius: float, count: int, seed: int = 7) -> list[Camera]:
    """Views from random directions above and below the orbit plane, 2.2-3.4 radii out: the
    governed path (seed 000's orbit in the XZ plane) shares none of them."""
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
class Sample:
    """One calibration frame on rank 0: the probe's estimate and the measured record."""

    workload: RankWorkload
    settings: FrameSettings
    record: FrameRecord


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
        self.spent = 0.0

    def use_record(self, record: FrameRecord) -> None:
        """Take the compositing work per stage (at scale 1) from the last frame's record."""
        self.stages, self.gather_bytes = stage_work(record)

    def sections(self, knobs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        rate = np.asarray(knobs["sampling_rate"], np.float64)
        scale = np.asarray(knobs["image_scale"], np.float64)
        ert = np.asarray(knobs["ert_threshold"], np.float64)
        idx = np.abs(ert[:, None] - self.thresholds[None, :]).argmin(axis=1)
        pixels = self.width * self.height * scale**2
        step = 1.0 / rate
        samples = self.workload.samples(step, idx, pixels)
        skipped = self.workload.skipped(step, idx, pixels)
        rays = self.workload.ray_counts(pixels)
        out = self.model.predict_sections(samples, skipped, rays, pixels, self.stages,
                                          self.gather_bytes, image_scale=scale)
        finish = np.where(scale < 1.0, self.finish_per_pixel * self.width * self.height, 0.0)
        out["finish"] = finish
        out["frame"] = out["frame"] + finish + self.spent
        return out

    def __call__(self, knobs: dict[str, np.ndarray]) -> np.ndarray:
        return self.sections(knobs)["frame"]


def stage_work(record: FrameRecord) -> tuple[list[list[StageWork]], float]:
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


def fit_volume_model(samples: Sequence[Sample], ranks: int, width: int, height: int,
                     thresholds: np.ndarray, cores: float = math.inf,
                     threads: float = 1.0) -> tuple[ClusterFrameModel, float]:
    """Per-rank render models (CPU seconds of work), the joint compositing model and the
    upscale cost; ``cores``/``threads``: how the ranks share the machine's cores."""
    renders = []
    for r in range(ranks):
        est_s, est_k, est_r, px, sec = [], [], [], [], []
        for s in samples:
            rec = s.record
            pixels = rec.render_width * rec.render_height
            idx = int(np.abs(thresholds - s.settings.ert_threshold).argmin())
            w = s.workload
            est_s.append(w.length[idx, r] / s.settings.step * pixels)
            est_k.append((w.span[idx, r] - w.length[idx, r]) / s.settings.step * pixels)
            est_r.append(w.rays[r] * pixels)
            px.append(pixels)
            cpu = rec.ranks[r].cpu_seconds
            sec.append(cpu if cpu > 0 else rec.ranks[r].render_seconds)
        renders.append(RenderModel.fit(est_s, est_k, est_r, px, sec))
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
    return ClusterFrameModel(tuple(renders), stage, gather,
                             meta={"ranks": ranks, "frames": len(samples),
                                   "width": width, "height": height},
                             cores=cores, threads=threads), finish


def shared_cores(renderer: DistributedRenderer) -> tuple[float, float]:
    """(cores the ranks share, threads per rank) — collective. Ranks on one node share its
    cores (processor sharing); with a core per rank thread or more it changes nothing."""
    from raytracer.volume.mpi_runtime import cpu_cores, ranks_on_node

    per_node = ranks_on_node(renderer.comm)
    threads = float(getattr(renderer, "threads", max(1, cpu_cores() // per_node)))
    return float(cpu_cores()) * renderer.size / per_node, threads


@dataclass
class TunedVolumeFrame:
    """What rank 0 learns of one governed frame."""

    image: np.ndarray
    settings: FrameSettings
    measured: float  # rank 0's frame: probe + choice + render + composite + gather + upscale
    predicted: float
    corrected: float
    record: FrameRecord
    probe_seconds: float
    over_budget: bool = False
    sections: dict[str, float] = field(default_factory=dict)
    quality: dict[str, float] = field(default_factory=dict)
    search_seconds: float = 0.0  # the controller's search for this frame


class TunedVolumeRenderer:
    """Holds a :class:`DistributedRenderer` at a target frame time (call every method on
    every rank: they are collective). Rank 0 holds the tuner and drives every frame through
    one :class:`~raytracer.volume.frame_sync.FrameSync` broadcast (camera, target, knobs,
    size, controller, tuning); the other ranks restore what it says."""

    def __init__(self, renderer: DistributedRenderer, width: int, height: int,
                 target_seconds: float, controller: str = "feedforward",
                 pi_gains: tuple[float, float] = (0.05, 0.2)) -> None:
        self.renderer = renderer
        self.comm = renderer.comm
        self.rank = renderer.rank
        self.sync = FrameSync(self.comm)
        self.width, self.height = width, height
        self.target = float(target_seconds)
        self.controller_name = controller
        self.tuning = True  # False: the fixed controller holds the last frame's knobs
        self.pi_gains = pi_gains
        self.thresholds = np.linspace(*ERT[:2], ERT[2])
        self.grid: BlockGrid | None = None
        self.boxes = brick_boxes(renderer.partition)
        self.cores, self.threads = shared_cores(renderer)
        self.model: VolumeModel | None = None
        self.losses: QualityLosses | None = None
        self.tuner: Tuner | None = None
        self.fixed_settings: FrameSettings | None = None
        self.last_settings: FrameSettings | None = None  # rank 0: the last governed frame's
        if self.rank == 0:
            self.grid = BlockGrid.for_volume(renderer.volume, renderer.tf)

    # ------------------------------------------------------------- the frame protocol

    def state(self, op: int, camera: Camera | None = None,
              settings: FrameSettings | None = None, status: int = 0) -> FrameState:
        """Rank 0: this renderer's state for one collective step (what :meth:`follow` and
        the other ranks restore)."""
        return FrameState(op, camera, self.target, settings or BEST, self.width, self.height,
                          CONTROLLER_NAMES.index(self.controller_name), self.tuning, status)

    def restore(self, state: FrameState) -> None:
        """Ranks >= 1: take rank 0's target, size, controller and tuning switch."""
        self.target = state.target
        if (state.width, state.height) != (self.width, self.height):
            self.resize(state.width, state.height)
        self.controller_name = CONTROLLER_NAMES[state.controller]
        self.tuning = state.tuning

    def follow(self, state: FrameState) -> FrameResult:
        """Ranks >= 1: render the frame rank 0 shared (collective with rank 0's frame)."""
        self.restore(state)
        return self.renderer.render_frame(state.camera, self.width, self.height,
                                          state.settings)

    def _probe(self, camera: Camera) -> tuple[RankWorkload, float]:
        t0 = time.perf_counter()
        w = probe_workload(self.grid, camera, self.width, self.height, self.boxes,
                           self.thresholds)
        return w, time.perf_counter() - t0

    def _frame(self, camera: Camera, settings: FrameSettings | None
               ) -> tuple[FrameSettings, FrameResult]:
        """One frame at rank 0's ``settings`` (None on the others), shared as one state."""
        if self.rank == 0:
            self.sync.share(self.state(FRAME, camera, settings))
            return settings, self.renderer.render_frame(camera, self.width, self.height,
                                                        settings)
        state = self.sync.share(None)
        return state.settings, self.follow(state)

    def _follow_until_done(self) -> FrameState:
        """Ranks >= 1: render the frames rank 0 drives until it shares DONE."""
        while (state := self.sync.share(None)).op != DONE:
            self.follow(state)
        return state

    # ------------------------------------------------------------------- calibration

    def calibrate(self, cameras: Sequence[Camera], frames: int = 16, seed: int = 11) -> None:
        """Render ``frames`` calibration frames (random knobs on ``cameras``), fit the model,
        then measure the quality losses of each knob on the first camera."""
        rng = np.random.default_rng(seed)
        space = knob_space()
        samples: list[Sample] = []
        for i in range(frames):
            cam = cameras[i % len(cameras)]
            settings = workload = None
            if self.rank == 0:
                levels = [int(rng.integers(len(k))) for k in space.knobs]
                settings = settings_of(space.at_levels(levels))
                if i == 0:
                    settings = BEST
                workload, _ = self._probe(cam)
            settings, res = self._frame(cam, settings)
            if self.rank == 0:
                samples.append(Sample(workload, settings, res.record))
        if self.rank == 0:
            model, finish = fit_volume_model(samples[1:], self.renderer.size, self.width,
                                             self.height, self.thresholds, self.cores,
                                             self.threads)
            self.model = VolumeModel(model, finish, self.width, self.height, self.thresholds)
            self.model.use_record(samples[-1].record)
        self.losses = self.measure_losses(cameras[0])
        if self.rank == 0:
            self._make_tuner()

    def measure_losses(self, camera: Camera) -> QualityLosses | None:
        """1 − SSIM of each knob's levels against the full-quality frame (collective)."""
        _, ref = self._frame(camera, BEST)
        space = knob_space()
        sweeps: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for knob in space.knobs:
            values = np.unique(np.concatenate([knob.values[:: max(1, len(knob) // 5)],
                                               knob.values[-1:]]))
            losses = []
            for v in values:
                trial = settings_of(knobs_of(BEST) | {knob.name: float(v)})
                _, res = self._frame(camera, trial if self.rank == 0 else None)
                if self.rank == 0:
                    losses.append(1.0 - ssim(to_display(res.image), to_display(ref.image)))
            if self.rank == 0:
                sweeps[knob.name] = (values, np.maximum.accumulate(np.asarray(losses)[::-1])[::-1])
        return QualityLosses(sweeps) if self.rank == 0 else None

    def full_quality_seconds(self, camera: Camera) -> float | None:
        """Rank 0's frame time at the best settings on ``camera``, the second of two (the
        first warms up); None on the other ranks (collective)."""
        seconds = None
        for _ in range(2):
            _, res = self._frame(camera, BEST)
            if self.rank == 0:
                seconds = res.record.frame_seconds
        return seconds

    # -------------------------------------------------------------------- settings

    def use_controller(self, name: str, pi_gains: tuple[float, float] | None = None) -> None:
        """Start a fresh controller (the model and quality losses are kept). Rank 0's call
        decides; the other ranks learn it from the next frame's state."""
        if name not in CONTROLLERS:
            raise ValueError(f"unknown controller {name!r}; choose from {sorted(CONTROLLERS)}")
        self.controller_name = name
        if pi_gains is not None:
            self.pi_gains = pi_gains
        if self.rank == 0:
            self._make_tuner()

    def set_tuning(self, on: bool) -> None:
        """Tuning off holds the last governed frame's knobs (the fixed controller); on
        starts the chosen controller afresh (rank 0 decides, as for :meth:`use_controller`)."""
        if on == self.tuning:
            return
        self.tuning = on
        self.fixed_settings = None if on else self.last_settings
        if self.rank == 0:
            self._make_tuner()

    def set_target(self, seconds: float) -> None:
        """Change the target from the next frame on (rank 0 holds the tuner; the other
        ranks learn it from the next frame's state)."""
        self.target = float(seconds)
        if self.tuner is not None:
            self.tuner.target_seconds = self.target

    def resize(self, width: int, height: int) -> None:
        """Render at another display size from the next frame on (rank 0 decides; the others
        follow with the next frame's state); the model's per-pixel terms carry over, its
        compositing work follows from the next frame's record."""
        self.width, self.height = width, height
        if self.model is not None:
            self.model.width, self.model.height = width, height

    def swap_renderer(self, renderer: DistributedRenderer) -> None:
        """Render another volume (or partition) from the next frame on, keeping the tuner and
        its feedback state: what a user's loop does when the data changes (collective)."""
        self.renderer = renderer
        self.boxes = brick_boxes(renderer.partition)
        if self.rank == 0:
            self.grid = BlockGrid.for_volume(renderer.volume, renderer.tf)

    def _make_tuner(self) -> None:
        space = knob_space(self.losses)
        name = self.controller_name if self.tuning else "fixed"
        if name == "fixed":
            ctrl = FixedController(space, self.target, knobs=knobs_of(self.fixed_settings)
                                   if self.fixed_settings else None)
        elif name == "pi":
            ctrl = PIController(space, self.target, kp=self.pi_gains[0], ki=self.pi_gains[1])
        else:
            ctrl = CONTROLLERS[name](space, self.target)
        self.space = space
        self.tuner = Tuner(space, self.model, self.target, controller=ctrl)

    def tune_fixed_by_measurement(self, camera: Camera, iterations: int = 10) -> FrameSettings:
        """The fixed baseline's setting: bisection on the sampling rate (then the scale) by
        rendering ``camera`` until its frame time is within 1 % of the target. Rank 0 runs
        the search and shares each trial frame; the others render them (collective)."""
        if self.rank != 0:
            self.fixed_settings = self._follow_until_done().settings
            return self.fixed_settings
        space = knob_space(self.losses)
        q = space.quality(space.grid())
        order = [space.at_index(int(i)) for i in np.argsort(q, kind="stable")]
        lo, hi, best = 0, len(order) - 1, 0
        for _ in range(iterations):
            mid = (lo + hi + 1) // 2
            _, res = self._frame(camera, settings_of(order[mid]))
            t = res.record.frame_seconds
            if t <= self.target:
                best, lo = mid, mid
            else:
                hi = mid - 1
            if lo >= hi or abs(t / self.target - 1.0) < 0.01:
                break
        self.fixed_settings = settings_of(order[best])
        self.sync.share(self.state(DONE, settings=self.fixed_settings))
        self._make_tuner()
        return self.fixed_settings

    # ------------------------------------------------------------------ governed frames

    def render(self, camera: Camera, reference: bool = False) -> TunedVolumeFrame | None:
        """One governed frame (collective); rank 0 gets the frame, the others None. With
        ``reference`` the full-quality frame is rendered too (untimed) for PSNR/SSIM."""
        t0 = time.perf_counter()
        settings, decision, probe_s = None, None, 0.0
        if self.rank == 0:
            self.model.workload, probe_s = self._probe(camera)
            self.model.spent = time.perf_counter() - t0
            decision = self.tuner.choose()
            settings = settings_of(decision.knobs)
        settings, res = self._frame(camera, settings)
        quality: dict[str, float] = {}
        if reference:
            _, ref = self._frame(camera, BEST)
            if self.rank == 0:
                a, b = to_display(res.image), to_display(ref.image)
                quality = {"psnr": psnr(a, b), "ssim": ssim(a, b)}
        if self.rank != 0:
            return None
        rec = res.record
        measured = self.model.spent + rec.frame_seconds
        sections = {k: float(np.asarray(v).ravel()[0]) for k, v in
                    self.model.sections(one_setting(settings)).items()
                    if k != "render_per_rank"}
        self.tuner.observe(measured)
        self.model.use_record(rec)
        self.last_settings = settings
        return TunedVolumeFrame(res.image, settings, measured, decision.predicted,
                                decision.corrected, rec, probe_s, decision.over_budget,
                                sections, quality, decision.search_seconds)

    def render_predicted(self, camera: Camera, settings: FrameSettings | None
                         ) -> tuple[FrameResult, dict[str, np.ndarray] | None]:
        """Render ``camera`` at rank 0's ``settings`` (None on the others; collective) and on
        rank 0 what the model predicted for it (probe included, no time spent before the
        frame), then let the model take this frame's compositing work: a model check."""
        if self.rank != 0:
            return self._frame(camera, None)[1], None
        self.model.workload, _ = self._probe(camera)
        self.model.spent = 0.0
        _, res = self._frame(camera, settings)
        sections = self.model.sections(one_setting(settings))
        self.model.use_record(res.record)
        return res, sections


def knobs_of(s: FrameSettings) -> dict[str, float]:
    """The tuner's knobs for frame settings (the inverse of :func:`settings_of`)."""
    return {"sampling_rate": 1.0 / s.step, "image_scale": s.image_scale,
            "ert_threshold": s.ert_threshold}


def one_setting(s: FrameSettings) -> dict[str, np.ndarray]:
    """Frame settings as a one-candidate knob batch (what the model prices)."""
    return {k: np.array([v]) for k, v in knobs_of(s).items()}
