"""The distributed volume renderer held at a target frame time by the same Tuner as the ray tracer.

Per frame (collective; the tuner lives on rank 0)::

    rank 0: probe the view (block grid, per-brick termination) ─► per-rank samples and rays
            for every candidate ─► per-rank model (the per-process analytical model of the
            HemoCell study): max over ranks of the local render + Σ compositing stages +
            gather + upscale ─► Tuner chooses the knobs
    share the frame's state (camera, target, knobs: one FrameSync broadcast) ─► every rank
    renders its brick ─► composite ─► gather ─► rank 0 observes its frame time (probe +
    choice + render + composite + gather + upscale)

The knobs and their quality losses are in ``knobs``, the model, its calibration views and
its fit in ``model_fit``, how the feed-forward is tuned in ``control_settings``; the frame
protocol between the ranks in ``frame_sharing``, the
calibration frames in ``calibration_frames``, the quality measurements in ``quality_measures``
and the frame times found by rendering (the fixed baseline among them) in
``measured_baselines``. This module is the renderer that uses them frame by frame.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
import weakref
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np

from autotune import FrameLoop, FramePrice, PartDrift, RunningOverhead
from common.collector import freeze_set_up
from governed.probe_policy import DEFAULT_PROBE_POLICY
from governed.volume import measured_baselines
from governed.volume.calibration_frames import calibration_samples, random_settings
from governed.volume.control_settings import (
    DRIFT_GAIN,
    DRIFTING,
    FEEDBACK_GAIN,
    VOLUME_SETTLE,
    volume_probe_schedule,
)
from governed.volume.frame_sharing import SharedFrames
from governed.volume.knobs import (
    ERT,
    QualityLosses,
    knob_steps,
    knobs_of,
    one_setting,
    settings_of,
    volume_knob_space,
)
from governed.volume.model_fit import (
    CalibrationSample,
    RendererFit,
    VolumeModel,
    fit_render_models,
    fit_volume_model,
    group_observation,
    render_cache_bytes,
    shared_cores,
    streamed_shares,
    volume_calibration_views,
    work_seconds,
)
from governed.volume.quality_measures import image_quality, knob_losses
from governed.volume.workload_probe import (
    BlockGrid,
    RankWorkload,
    WorkloadProbe,
    brick_boxes,
)
from models.core_sharing import shares_cores
from models.rank_correction import RankCorrection
from models.simd_groups import GroupRatioFit
from models.volume_cost import ClusterFrameModel
from raytracer.camera import Camera
from raytracer.volume.distributed import (
    DistributedFrameRecord,
    DistributedRenderer,
    FrameResult,
    FrameSettings,
    seed_orbit,
)

#: A renderer's first frames run slower (the kernel built for its voxel type, then 10-35 %
#: over about three frames: tooth, aneurism and bonsai on 2 ranks at 256²), so a renderer is
#: first given this many of the cheapest frames, untimed
WARMUP_FRAMES = 3


@dataclass
class TunedVolumeFrame:
    """What rank 0 learns of one governed frame."""

    image: np.ndarray
    settings: FrameSettings
    measured: float  # rank 0's wait: probe + choice + render + composite + gather + upscale
    # + the tuner's bookkeeping
    predicted: float
    corrected: float
    record: DistributedFrameRecord
    probe_seconds: float
    over_budget: bool = False
    search_seconds: float = 0.0  # the tuner's choice of this frame's knobs: all its work
    # before the frame but the probe (the search, pricing, the probe schedule)
    bookkeeping_seconds: float = 0.0  # the tuner's work after the frame (feedback, record)
    pricing: VolumeModel | None = field(default=None, repr=False)  # the model as it priced it
    spent: float = 0.0  # the measured part of its price (probe, running overhead)

    @functools.cached_property
    def sections(self) -> dict[str, float]:
        """Seconds per section the model predicted for the chosen setting (render, each
        stage, composite, gather, finish, frame): priced when asked, as diagnostics, so the
        governed loop does not pay for them."""
        if self.pricing is None:
            return {}
        return {k: float(np.asarray(v).ravel()[0]) for k, v in
                self.pricing.sections(one_setting(self.settings), self.spent).items()
                if k != "render_per_rank"}


class TunedVolumeRenderer(SharedFrames):
    """Holds a :class:`DistributedRenderer` at a target frame time (call every method on
    every rank: they are collective). Rank 0 holds the tuner and drives every frame through
    one :class:`~raytracer.volume.frame_sync.FrameSync` broadcast (camera, target, knobs,
    size, controller, tuning); the other ranks restore what it says
    (:class:`~governed.volume.frame_sharing.SharedFrames`)."""

    def __init__(self, renderer: DistributedRenderer, width: int, height: int,
                 target_seconds: float, controller: str = "feedforward",
                 pi_gains: tuple[float, float] = (0.05, 0.2),
                 probe_policy: str = DEFAULT_PROBE_POLICY) -> None:
        # target, controller, tuning switch and feedback rules: the core's one frame loop
        # (rank 0 chooses with it once calibrated; the other ranks keep its state in step)
        super().__init__(renderer, width, height,
                         FrameLoop(target_seconds, controller, pi_gains=pi_gains,
                                   feedback_gain=FEEDBACK_GAIN, settle=VOLUME_SETTLE))
        self.thresholds = np.linspace(*ERT[:2], ERT[2])
        self.grid: BlockGrid | None = None  # rank 0: the volume's block grid and its probe
        self.diagonal = 0.0  # rank 0: the volume's diagonal (a jump of the eye is set against it)
        self.probe: WorkloadProbe | None = None
        self._probed: tuple[tuple, RankWorkload] | None = None  # the last view probed, its work
        # rank 0, on a device that is not the CPU: the next view is probed on the probe's
        # thread while the device renders this one (the seed's design; on a CPU device the
        # probe would take the frame's own cores); the view of the last probe started ahead and
        # its result (None once a frame took it)
        self.probe_ahead = not shares_cores(renderer.device_kind)
        self._ahead: tuple[tuple, Future[RankWorkload]] | None = None
        self.schedule = volume_probe_schedule(probe_policy)  # rank 0: which governed frames probe
        # rank 0: how far the frames since the last probe moved from its prices (reset by each
        # fresh probe; the bias feedback learns what it leaves)
        self.drift = PartDrift(DRIFT_GAIN)
        # rank 0: the candidates' modelled seconds and the model as it priced them, kept until
        # the next fresh probe (the lessons of the frames between wait for it), and the ones
        # before (what the schedule measures the drift by)
        self._priced: tuple[object, np.ndarray, VolumeModel] | None = None
        self._priced_before: tuple[object, np.ndarray, VolumeModel] | None = None
        self.boxes = brick_boxes(renderer.partition)
        self.sharing = shared_cores(renderer)  # collective; off on a GPU
        # a core's L2 on a CPU device, the device's global memory cache on a GPU
        self.cache_bytes = render_cache_bytes(renderer)
        self.streamed = np.zeros(renderer.size)  # rank 0: each brick's streamed share
        # rank 0: what each renderer taught the tuner, and the current renderer's
        self._fits: weakref.WeakKeyDictionary[DistributedRenderer, RendererFit] = \
            weakref.WeakKeyDictionary()
        self.fit = RendererFit.new(renderer.size)
        self.model: VolumeModel | None = None
        # rank 0: the frame model fitted on every calibrated volume's frames (what prices a
        # volume that was not calibrated), and those frames
        self.joint_model: ClusterFrameModel | None = None
        self.calibration_samples: list[CalibrationSample] = []
        # each renderer's quality losses, measured on it once a calibration has finished (every
        # rank knows which were measured, rank 0 holds them), and those the loop ranks by
        self._losses: weakref.WeakKeyDictionary[DistributedRenderer, QualityLosses | None] = \
            weakref.WeakKeyDictionary()
        self._calibrated = False
        self._ranked_by: QualityLosses | None = None
        self.fixed_settings: FrameSettings | None = None
        self.last_settings: FrameSettings | None = None  # rank 0: the last governed frame's
        self._last_camera: Camera | None = None  # rank 0: and its view (a still view settles)
        # rank 0: per frame, what is neither probe nor frame (the choice, sharing the state,
        # the bookkeeping after the frame)
        self.overhead = RunningOverhead()
        if self.rank == 0:
            self._use_grid()

    def _use_grid(self) -> None:
        """Rank 0: the block grid of the current volume, its probe, each brick's streamed
        share and what the tuner learned of the renderer."""
        self.grid = BlockGrid.for_volume(self.renderer.volume, self.renderer.tf)
        self.diagonal = 2.0 * self.renderer.volume.radius  # what a jump of the eye is set against
        if self.probe is not None:
            self.probe.close()  # a probe of the last volume ahead finishes, unread
        self._ahead = None
        self.probe = WorkloadProbe(self.grid, self.boxes, self.thresholds)
        self._probed = None  # another volume or transfer function: every view probed anew
        self.schedule.restart()
        self._priced = None
        self.streamed = streamed_shares(self.grid.working_set_bytes(self.boxes),
                                        self.cache_bytes)
        self.fit = self._fits.setdefault(self.renderer, RendererFit.new(self.renderer.size))
        if self.model is not None:
            self._price_with_fit()

    def _price_with_fit(self) -> None:
        """Rank 0: the model prices the current renderer with what it learned of it: its own
        render models where it was calibrated (bonsai's held-out orbit, 2 ranks, the same
        frames priced both ways in five quiet runs at 256² and 512²: 6.7-10.1 % per rank
        against 12.5-14.7 % from the models fitted on bonsai and ironprot together), else the
        joint ones."""
        self.model.streamed = self.streamed
        self.model.group_fit = self.fit.group_fit
        self.model.correction = self.fit.correction
        self.model.model = (dataclasses.replace(self.joint_model, render=self.fit.render)
                            if self.fit.render else self.joint_model)

    @property
    def probe_policy(self) -> str:
        """Which governed frames probe their view
        (:data:`~governed.probe_policy.PROBE_POLICIES`); setting it starts the schedule
        afresh (rank 0 decides)."""
        return self.schedule.policy

    @probe_policy.setter
    def probe_policy(self, policy: str) -> None:
        self.schedule = volume_probe_schedule(policy)
        self._priced = None

    @property
    def losses(self) -> QualityLosses | None:
        """Rank 0: the current renderer's quality losses (None until measured on it)."""
        return self._losses.get(self.renderer)

    @property
    def group_fit(self) -> GroupRatioFit:
        """Rank 0: the current renderer's SIMD group-ratio fit."""
        return self.fit.group_fit

    @property
    def pricing_samples(self) -> list[CalibrationSample]:
        """Rank 0: the calibration frames the current renderer's render models were fitted
        on: its own where it was calibrated, else every calibrated volume's."""
        return self.fit.samples or self.calibration_samples

    def _learn(self, result: FrameResult) -> None:
        """Rank 0: what a frame the model priced (its workload the model's) tells it: each
        rank's measured against its predicted work (while the correction learns), the group
        ratios, the compositing work."""
        rec = result.record
        if self.fit.correction.learning:
            predicted = self.model.uncorrected_rank_work(rec.settings)
            self.fit.correction.observe([work_seconds(r) for r in rec.ranks], predicted)
        self.group_fit.observe(*group_observation(self.model.workload, rec))
        self.model.use_record(rec)

    def _governed_workload(self, camera: Camera) -> tuple[RankWorkload, float, bool]:
        """Rank 0: the workload a governed frame is priced on, the seconds probing it took,
        and whether it is fresh: probed now where the probe policy says the last probe cannot
        stand in, which on change includes every new view while the ranks' correction still
        learns the renderer (it learns only from frames rendered on their own probe: after a
        swap to aneurism, learning from one frame in two to eight took 5-6 frames to be back
        within 5 %, against 2), else the last probe's. A fresh probe also reprices the
        candidates."""
        view = (camera, self.width, self.height)
        ahead = self._ahead
        if self._probed is not None and self._probed[0][1:] != view[1:]:
            self.schedule.restart()
        if self._probed is not None and not self.schedule.due(
                camera, self.diagonal, learning=self.fit.correction.learning):
            return self._probed[1], 0.0, False
        if ahead is not None and ahead[0] == view:  # probed during the last frame
            t0 = time.perf_counter()
            workload = ahead[1].result()
            seconds = time.perf_counter() - t0  # what the last frame did not hide
            self._probed, self._ahead = (view, workload), None
        else:
            workload, seconds = self._probe(camera)
        self._priced_before, self._priced = self._priced, None
        self.drift.restart()
        return workload, seconds, True

    def _probe(self, camera: Camera) -> tuple[RankWorkload, float]:
        """Rank 0: the view's workload and the seconds probing it took; the last frame's
        workload (0 s) when neither the camera nor the size changed (the probe is
        deterministic; a still camera is a viewer's common case)."""
        view = (camera, self.width, self.height)
        if self._probed is not None and self._probed[0] == view:
            return self._probed[1], 0.0
        t0 = time.perf_counter()
        w = self.probe(camera, self.width, self.height)
        self._probed = (view, w)
        return w, time.perf_counter() - t0

    # ------------------------------------------------------------------- calibration

    def calibrate(self, cameras: Sequence[Camera], frames: int = 16, seed: int = 11,
                  also: Sequence[tuple[DistributedRenderer, Sequence[Camera]]] = ()) -> None:
        """Render ``frames`` calibration frames (random knobs on ``cameras``) of this volume
        and as many of each renderer in ``also`` (other volumes on the same ranks: their
        working sets tell the model what the cache is worth), fit the model, then measure the
        quality losses of each knob on the first camera of this volume. Each calibrated
        volume gets render models of its own; a volume swapped in later is priced by the
        models fitted on all of them."""
        rng = np.random.default_rng(seed)
        self._calibrated = False
        samples: list[CalibrationSample] = []
        fits: list[RendererFit] = []
        home = self.renderer
        for renderer, views in ((home, cameras), *also):
            if renderer is not self.renderer:  # the home volume's grid is already built
                self.swap_renderer(renderer)
            else:
                self._warm_up()
            fits.append(self.fit)
            self.fit.correction = RankCorrection(renderer.size)  # a new fit: nothing to correct
            settings = random_settings(rng, frames) if self.rank == 0 else None
            self.fit.samples = calibration_samples(self, self._probe, views, settings, frames,
                                                   self.streamed)
            for sample in self.fit.samples:
                self.group_fit.observe(*group_observation(sample.workload, sample.record))
            samples += self.fit.samples
        if self.renderer is not home:
            self.swap_renderer(home)
        if self.rank == 0:
            self._fit_model(samples, fits, own_render_models=bool(also))
        self._losses[self.renderer] = self.measure_losses(cameras[0])
        if self.rank == 0:
            self._configure_loop()
        self._calibrated = True
        freeze_set_up()  # every rank: no collection of the set-up's objects in a frame

    def _fit_model(self, samples: list[CalibrationSample], fits: list[RendererFit],
                   own_render_models: bool) -> None:
        """Rank 0: the frame model fitted on every calibration frame, each calibrated
        renderer's render models (fitted on its own frames where ``own_render_models``, else
        the joint ones), and the model that prices the current renderer with them."""
        self.calibration_samples = samples
        self.joint_model, finish = fit_volume_model(samples, self.renderer.size, self.width,
                                                    self.height, self.thresholds, self.sharing)
        for fit in fits:
            fit.render = fit_render_models(fit.samples, self.renderer.size,
                                           self.thresholds) if own_render_models else \
                self.joint_model.render
        self.model = VolumeModel(self.joint_model, finish, self.width, self.height,
                                 self.thresholds)
        self._priced = None
        self.schedule.restart()
        self._price_with_fit()
        self.model.use_record(samples[-1].record)
        # price the candidates once here, untimed: the first call compiles the pricing
        # (0.6 s, which the first governed frame would otherwise pay)
        self.model.workload = samples[-1].workload
        self.model(volume_knob_space().grid())

    def measure_losses(self, camera: Camera) -> QualityLosses | None:
        """1 − SSIM of each knob's levels against the full-quality frame (collective):
        :func:`~governed.volume.quality_measures.knob_losses`."""
        return knob_losses(self, camera)

    # ----------------------------------------------------------- measured frame times

    def full_quality_seconds(self, camera: Camera, warmup: int = 2, repeats: int = 3
                             ) -> float | None:
        """Rank 0's frame time at the best settings on ``camera``: the median of ``repeats``
        frames after ``warmup`` (a volume's first frames on a device are up to 2.5x slower:
        measured on tooth after a swap); None on the other ranks (collective):
        :func:`~governed.volume.measured_baselines.full_quality_seconds`."""
        return measured_baselines.full_quality_seconds(self, camera, warmup, repeats)

    def repeated_frame_seconds(self, camera: Camera, settings: FrameSettings, frames: int
                               ) -> list[float] | None:
        """Rank 0's frame times of ``frames`` renders of one view at fixed ``settings`` (what
        the machine's frame-to-frame noise alone does); None on the other ranks
        (collective)."""
        return measured_baselines.repeated_frame_seconds(self, camera, settings, frames)

    def best_setting_by_measurement(self, camera: Camera, repeats: int = 3) -> FrameSettings:
        """The best-looking setting whose median of ``repeats`` frames of ``camera`` fits the
        target, found by rendering (collective; the tuner is untouched):
        :func:`~governed.volume.measured_baselines.best_setting_by_measurement`."""
        return measured_baselines.best_setting_by_measurement(self, camera, self.losses,
                                                              repeats)

    def tune_fixed_by_measurement(self, camera: Camera) -> FrameSettings:
        """The fixed baseline's setting: :meth:`best_setting_by_measurement` on ``camera``,
        then held (collective)."""
        self.fixed_settings = self.best_setting_by_measurement(camera)
        if self.rank == 0:
            self._configure_loop()
        return self.fixed_settings

    # -------------------------------------------------------------------- settings

    def resize(self, width: int, height: int) -> None:
        """Render at another display size from the next frame on (rank 0 decides; the others
        follow with the next frame's state); the model's per-pixel terms carry over, its
        compositing work follows from the next frame's record."""
        super().resize(width, height)
        self._priced = None
        self.schedule.restart()
        if self.model is not None:
            self.model.width, self.model.height = width, height
            self.model.prepare(self.loop.space.grid())

    def swap_renderer(self, renderer: DistributedRenderer) -> None:
        """Render another volume (or partition) from the next frame on, keeping what the tuner
        learned: what a user's loop does when the data changes (collective). Once calibrated,
        a renderer's first swap measures its knobs' quality losses on its first calibration
        view (about 35 untimed frames; docs/design-notes.md, "Looks measured on each volume"),
        and the controller starts afresh where they differ from those it ranked by."""
        self.renderer = renderer
        self.boxes = brick_boxes(renderer.partition)
        if self.rank == 0:
            self._use_grid()
        self._warm_up()
        if self._calibrated and renderer not in self._losses:
            view = volume_calibration_views(renderer.volume.radius, 1)[0]
            self._losses[renderer] = self.measure_losses(view)
        if self.rank == 0 and self._calibrated and self.losses is not self._ranked_by:
            self._configure_loop()

    def _warm_up(self) -> None:
        """Render the current renderer's first frames at the cheapest setting, untimed, so
        that no governed or calibration frame is one of them (collective). Measured after a
        swap: the first full-quality frame 9.7 -> 7.0 ms on aneurism, 16.4 -> 14.7 ms on
        bonsai (steady: 7.1 and 15.0). The colour tables of every step the tuner can choose
        are built here too: a frame that built one took 0.2-0.3 ms longer, so calibration
        frames (each at a new step) paid what later frames at those steps did not."""
        self.renderer.prepare_steps(knob_steps())
        view = seed_orbit(self.renderer.volume.radius, 1)[0]
        cheapest = settings_of(volume_knob_space().lowest()) if self.rank == 0 else None
        for _ in range(max(0, WARMUP_FRAMES - self.renderer.frames_rendered)):
            self.shared_frame(view, cheapest)

    def _configure_loop(self) -> None:
        """Rank 0, after calibration: the loop's knob space (ordered by the measured quality
        losses) and price (the model), or the fixed setting found by measurement."""
        space = volume_knob_space(self.losses)
        self._ranked_by = self.losses
        self.loop.configure(space, self._price)
        self.model.prepare(space.grid())
        self.model.model.load_kernels()  # the learning frames' kernel, not in the first frame
        if self.fixed_settings is not None:
            self.loop.hold(knobs_of(self.fixed_settings))

    def _price(self, knobs: dict[str, np.ndarray]) -> FramePrice:
        """The model's frame seconds of the candidates, apart from the measured part (the
        probe already spent and the running overhead of choosing and sharing the knobs: never
        scaled by the correction). Priced after each fresh probe and kept until the next one,
        with the model as it priced them: the lessons of the frames between take effect with
        the next probe, the frame loop's feedback with the next frame."""
        if self._priced is None or self._priced[0] is not knobs:
            pricing = copy.copy(self.model)  # as it priced these: for a frame's sections
            pricing.group_fit = copy.copy(self.group_fit)
            pricing.correction = copy.copy(self.fit.correction)
            self._priced = (knobs, self.model(knobs, spent=0.0), pricing)
        modelled, drift = self._priced[1], self.drift.factor(DRIFTING)
        return FramePrice(modelled * drift if drift != 1.0 else modelled, self.model.spent)

    def _probe_next(self, camera: Camera) -> None:
        """Rank 0: start the probe of ``camera``, the next frame's view, on the probe's thread,
        unless the last one started still runs (a frame shorter than a probe: the next frame
        then probes as it would without)."""
        running = self._ahead[1] if self._ahead is not None else None
        if running is None or running.done():
            self._ahead = ((camera, self.width, self.height),
                           self.probe.measure_async(camera, self.width, self.height))

    def _price_change(self) -> float | None:
        """Rank 0, after a fresh probe priced the candidates: the mean relative change of
        their prices since the last probe (None where there is none to compare): how far the
        workload drifted, for the probe schedule."""
        before, now = self._priced_before, self._priced
        if before is None or now is None or before[0] is not now[0]:
            return None
        return float(np.mean(np.abs(now[1] - before[1]) / np.maximum(before[1], 1e-12)))

    # ------------------------------------------------------------------ governed frames

    def render(self, camera: Camera, next_camera: Camera | None = None
               ) -> TunedVolumeFrame | None:
        """One governed frame (collective); rank 0 gets the frame, the others None. With
        ``next_camera`` (rank 0's) on a device that is not the CPU (:attr:`probe_ahead`), that
        view is probed on the probe's thread while this frame renders, and the next frame
        takes its workload where its probe policy asks for a probe."""
        t0 = time.perf_counter()
        settings, decision, probe_s, fresh, priced = None, None, 0.0, False, False
        if self.rank == 0:
            priced = self.loop.needs_price  # a baseline pays for no probe
            if priced:
                self.model.workload, probe_s, fresh = self._governed_workload(camera)
            spent = time.perf_counter() - t0
            # the model prices what is spent already and what the overhead will add
            self.model.spent = spent + self.overhead.seconds
            self.loop.settle_raises(camera == self._last_camera)
            decision = self.loop.choose()
            settings = settings_of(decision.knobs)
            if fresh:
                self.schedule.probed(camera, self._price_change())
            if priced and next_camera is not None and self.probe_ahead:
                self._probe_next(next_camera)
            choice = time.perf_counter() - t0 - probe_s  # all the tuner did but probe
        settings, res = self.shared_frame(camera, settings)
        if self.rank == 0:
            rec = res.record
            framed = time.perf_counter()
            pricing = self._priced[2] if priced and self._priced is not None else None
            if fresh:  # a frame teaches the model only with the workload it was rendered at
                self._learn(res)
            # the frame's whole wait: probe, choice, frame and this bookkeeping (the feedback
            # below needs it, so it alone is left out)
            measured = time.perf_counter() - t0
            self.overhead.update(measured - spent - rec.frame_seconds)
            if priced and not fresh:
                known = self.model.spent  # the measured part of the price, as chosen
                self.drift.update_part(DRIFTING, decision.corrected - known, measured - known)
            self.loop.observe(measured, decision.corrected)
            if priced:
                self.schedule.observed(decision.corrected, measured)
            else:  # probe afresh when a controller prices frames again
                self.schedule.restart()
            self.last_settings, self._last_camera = settings, camera
            bookkeeping = time.perf_counter() - framed
        if self.rank != 0:
            return None
        return TunedVolumeFrame(res.image, settings, measured, decision.predicted,
                                decision.corrected, rec, probe_s, decision.over_budget,
                                choice, bookkeeping, pricing,
                                self.model.spent)

    def quality_of(self, camera: Camera, settings: FrameSettings | None) -> dict[str, float]:
        """PSNR and SSIM of ``camera`` at rank 0's ``settings`` (None on the others) against
        the full-quality frame (collective; rank 0's, empty on the others):
        :func:`~governed.volume.quality_measures.image_quality`. Both are rendered here, so
        call it after the timed frames: a full-quality render between governed frames cost
        the next one 8-11 % more render time (a new step's colour table, the caches), which
        the feedback then chased (bonsai 256², 2 ranks: governed error 4 -> 9 %)."""
        return image_quality(self, camera, settings)

    def render_predicted(self, camera: Camera, settings: FrameSettings | None
                         ) -> tuple[FrameResult, dict[str, np.ndarray] | None]:
        """Render ``camera`` at rank 0's ``settings`` (None on the others; collective) and on
        rank 0 what the model predicted for it (probe included, no time spent before the
        frame), then let the model take this frame's compositing work: a model check."""
        if self.rank != 0:
            return self.shared_frame(camera, None)[1], None
        self.model.workload, _ = self._probe(camera)
        self.model.spent = 0.0
        self._priced = None  # the governed frames' next price from their own probe
        self.schedule.restart()
        _, res = self.shared_frame(camera, settings)
        sections = self.model.sections(one_setting(settings))
        self._learn(res)
        return res, sections
