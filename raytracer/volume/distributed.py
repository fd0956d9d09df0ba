"""The distributed frame loop: one brick per MPI rank, local ray casting, sort-last compositing.

Per frame, on every rank::

    frame start ─► raycast own brick at (width·scale, height·scale) ─► composite in the
    camera's visibility order (binary swap / 2-3 swap / radix-k) ─► gather to rank 0
    ─► rank 0: upscale to the display size when scale < 1 ─► final image

Every knob the tuner turns is a per-frame parameter (:class:`FrameSettings`: sample step,
image scale, early-ray-termination threshold) and every phase is timed on every rank: local
render wall, kernel and CPU seconds (and which of them is the rank's work:
:func:`work_clock`), each compositing stage (seconds, blend seconds, bytes,
partners), the gather, and rank 0's frame time from frame start to the final image (the time
the tuner holds). The per-rank figures travel to rank 0 as one float64 vector per rank
(``Gather``, no pickling) after the timed part of the frame.

Faults: set-up decisions (volume, transfer function, partition, OpenCL device) are agreed on
every rank before any collective (:func:`~raytracer.mpi.faults.guarded`), and every
blocking phase runs under a watchdog, so a bad input gives one error everywhere and a stuck
rank ends the job instead of hanging it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from raytracer.camera import Camera
from raytracer.mpi.faults import guarded, world
from raytracer.mpi.pinning import share_node
from raytracer.mpi.watchdog import watchdog
from raytracer.volume import compositing
from raytracer.volume.empty_space import cost_grid
from raytracer.volume.partition import kd_partition
from raytracer.volume.transfer_function import resolve_transfer_function
from raytracer.volume.upscale import upscale
from raytracer.volume.volume_data import load_volume

DEFAULT_TIMEOUT = 120.0  # seconds a blocking phase may take before the watchdog ends the job


@dataclass(frozen=True)
class FrameSettings:
    """The per-frame knobs: sample step (voxels), image scale (0, 1], ERT threshold
    (1: a ray stops only once opaque)."""

    step: float = 1.0
    image_scale: float = 1.0
    ert_threshold: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step) and self.step > 0):
            raise ValueError(f"sample step must be a positive number, got {self.step}")
        if not (math.isfinite(self.image_scale) and 0 < self.image_scale <= 1):
            raise ValueError(f"image scale must be in (0, 1], got {self.image_scale}")
        if not (math.isfinite(self.ert_threshold) and 0 < self.ert_threshold <= 1):
            raise ValueError(
                f"early-termination threshold must be in (0, 1], got {self.ert_threshold}"
            )

    def render_size(self, width: int, height: int) -> tuple[int, int]:
        """The size rendered and composited for a display of ``width`` x ``height``."""
        return (
            max(1, round(width * self.image_scale)),
            max(1, round(height * self.image_scale)),
        )


def seed_orbit(
    radius: float,
    frames: int = 72,
    orbits: float = 2.0,
    distance: float = 2.8,
    elevation: float = 0.0,
    fov_y: float = 45.0,
    phase: float = 0.0,
) -> list[Camera]:
    """The cluster study's camera path: ``frames`` views over ``orbits`` turns in the XZ plane.

    The path of Tkachev et al., "Prediction of Distributed Volume Visualization Performance to
    Support Render Hardware Acquisition": the eye circles the origin (where volumes are
    centred) at ``distance`` x ``radius`` (2.8 half-diagonals keep the whole volume in a
    45-degree view), ``elevation`` x radius above the plane, looking at the origin; ``phase``
    turns every view on by that fraction of the step between views (0.5: the views halfway
    between those of phase 0).
    """
    if frames < 1 or not (radius > 0 and distance > 0):
        raise ValueError(
            f"need frames >= 1, radius > 0, distance > 0; got {frames}, {radius}, {distance}"
        )
    r = distance * radius
    cams = []
    for i in range(frames):
        angle = 2.0 * math.pi * orbits * (i + phase) / frames
        eye = (r * math.sin(angle), elevation * radius, r * math.cos(angle))
        cams.append(Camera(eye, (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), fov_y))
    return cams


class LocalRenderer(Protocol):
    """What renders one rank's brick (the OpenCL Raycaster, or an emulator that sleeps)."""

    def render(
        self, camera: Camera, width: int, height: int, step: float, ert_threshold: float
    ) -> Any:  # -> object with .rgba, .kernel_seconds, .samples, .skipped, .rays
        ...

    def prepare_steps(self, steps: Iterable[float]) -> None:
        """Set up what rendering at these sample steps needs (outside any timed frame)."""
        ...


# ----------------------------------------------------------------------- frame records

#: The clocks a rank's render work can be measured in (:attr:`RankTiming.work_clock`), by
#: their code in the gathered vector; "" is a record from before the clock was recorded
WORK_CLOCKS = ("", "cpu", "kernel", "wall")


def device_kind_of(local: Any) -> str:
    """The OpenCL device kind ("CPU", "GPU", ...: ``DeviceInfo.kind``) a local renderer runs
    on; "CPU" for one without an OpenCL device (an emulator: it runs on the host)."""
    info = getattr(local, "device_info", None)
    return "CPU" if info is None else str(info.kind)


def work_clock(device_kind: str, cpu_seconds: float) -> str:
    """What a rank's render work is measured in on a ``device_kind`` device, as the ray
    tracer's timer chooses (governed/mesh/timers.py ``default_timer``): on a CPU device
    the process's CPU seconds ("cpu": the work of the runtime's threads, whatever share of
    the cores they got; "wall" where none were taken), elsewhere the kernel's OpenCL event
    seconds ("kernel": what the device spent; the host's CPU seconds only launched it)."""
    if device_kind != "CPU":
        return "kernel"
    return "cpu" if cpu_seconds > 0 else "wall"


@dataclass
class RankTiming:
    """One rank's share of one frame."""

    rank: int
    brick: int
    render_seconds: float  # wall: frame start to local image on the host
    kernel_seconds: float
    samples: int
    skipped: int
    rays: int
    composite_seconds: float  # all stages + gather
    stages: list[compositing.StageTiming] = field(default_factory=list)
    gather: compositing.StageTiming = field(
        default_factory=lambda: compositing.StageTiming("gather")
    )
    # process CPU seconds of the local render (all threads): the rank's work on a CPU device,
    # whatever share of a core it got (ranks that share a machine's cores run slower than
    # their work); on a GPU only the host's launching
    cpu_seconds: float = 0.0
    group_samples: int = 0  # samples as the SIMD groups paid them (0: not counted)
    # which of the seconds above is the rank's render work (:func:`work_clock`): "cpu"
    # (cpu_seconds), "kernel" (kernel_seconds), "wall" (render_seconds); "" in a record from
    # before it was recorded (CPU devices: cpu_seconds, wall where none were taken)
    work_clock: str = ""

    @property
    def group_ratio(self) -> float:
        """Samples as the SIMD groups paid them over the samples taken (1 where not counted):
        1.4-2.0 on Intel's 16-lane runtime, changing from view to view."""
        return self.group_samples / self.samples if self.samples > 0 < self.group_samples \
            else 1.0

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        return asdict(self)


#: A rank whose render ran this long beyond its CPU time was not running for that long (on a
#: quiet machine, a render's wall and CPU time agree within 0.15 ms in 95 % of frames)
DESCHEDULED_SECONDS = 1e-3


@dataclass
class DistributedFrameRecord:
    """Rank 0's record of one frame: settings, sizes, rank 0's frame time, every rank's phases."""

    frame: int
    eye: tuple[float, float, float]
    settings: FrameSettings
    algorithm: str
    width: int
    height: int
    render_width: int
    render_height: int
    order: list[int]
    frame_seconds: float  # rank 0: frame start to final (upscaled) image
    finish_seconds: float  # rank 0: the upscale
    ranks: list[RankTiming]

    @property
    def render_max(self) -> float:
        """Slowest local render wall time over the ranks."""
        return max(r.render_seconds for r in self.ranks)

    @property
    def descheduled(self) -> bool:
        """Whether a rank did not run for over :data:`DESCHEDULED_SECONDS` of its render: a
        frame the machine slowed, not its knobs."""
        return self.descheduled_seconds > DESCHEDULED_SECONDS

    @property
    def descheduled_seconds(self) -> float:
        """How long the rank that waited longest did not run during its render on a CPU device
        (wall time beyond its CPU time: the OS or the host had its core; what no model
        prices); 0 where the render work is not counted in CPU time (a GPU)."""
        gaps = [r.render_seconds - r.cpu_seconds for r in self.ranks if r.work_clock == "cpu"]
        return max([0.0, *gaps])

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for JSON."""
        out = asdict(self)
        out["eye"] = list(self.eye)
        return out


# brick, render, kernel, samples, skipped, rays, composite, gather s, gather bytes, cpu, group,
# work clock (its index in WORK_CLOCKS)
_HEAD = 12
_PER_STAGE = 6  # seconds, blend seconds, bytes sent, bytes received, blended pixels, partners


def _encode(rank_timing: RankTiming) -> np.ndarray:
    t = rank_timing
    head = [
        t.brick, t.render_seconds, t.kernel_seconds, t.samples, t.skipped, t.rays,
        t.composite_seconds, t.gather.seconds, t.gather.bytes_sent + t.gather.bytes_received,
        t.cpu_seconds, t.group_samples, WORK_CLOCKS.index(t.work_clock),
    ]  # fmt: skip
    body = [
        [s.seconds, s.blend_seconds, s.bytes_sent, s.bytes_received, s.blended_pixels,
         len(s.partners)]
        for s in t.stages
    ]  # fmt: skip
    return np.array(head + [x for row in body for x in row], np.float64)


def _decode(
    rank: int, vec: np.ndarray, stage_names: Sequence[str], partners: Sequence[Sequence[int]]
) -> RankTiming:
    stages = []
    for i, name in enumerate(stage_names):
        s = vec[_HEAD + _PER_STAGE * i : _HEAD + _PER_STAGE * (i + 1)]
        stages.append(
            compositing.StageTiming(
                name, float(s[0]), float(s[1]), int(s[2]), int(s[3]), int(s[4]),
                list(partners[i]),
            )
        )  # fmt: skip
    gather_bytes = int(vec[8])
    gather = compositing.StageTiming(
        "gather",
        float(vec[7]),
        bytes_sent=0 if rank == 0 else gather_bytes,
        bytes_received=gather_bytes if rank == 0 else 0,
    )
    return RankTiming(
        rank, int(vec[0]), float(vec[1]), float(vec[2]), int(vec[3]), int(vec[4]), int(vec[5]),
        float(vec[6]), stages, gather, float(vec[9]), int(vec[10]), WORK_CLOCKS[int(vec[11])],
    )  # fmt: skip


# ------------------------------------------------------------------------- the renderer


@dataclass
class FrameResult:
    """What :meth:`DistributedRenderer.render_frame` returns on a rank: the final RGBA image
    and the frame's record on rank 0 (None on the others)."""

    image: np.ndarray | None
    record: DistributedFrameRecord | None


class DistributedRenderer:
    """One brick per rank of ``comm``; renders frames collectively (call on every rank).

    ``volume`` and ``tf`` must be the same on every rank (see :func:`load_everywhere`).
    ``local`` overrides the local renderer (default: the OpenCL ``Raycaster`` of this rank's
    brick); ``balance`` splits bricks by the empty-space cost grid instead of cell counts;
    ``shares`` (one weight per rank) gives each rank that share of them instead of an equal
    one (:func:`~raytracer.volume.partition.kd_partition`). With ``share_cores`` (default)
    the ranks on one machine split its cores (:func:`~raytracer.mpi.pinning.share_node`):
    each OpenCL device gets its share of threads and, where the launcher left the ranks
    unpinned, each rank's calling thread and the threads it starts later are pinned to their
    own cores; an application that needs its process's affinity left alone passes
    ``share_cores=False``.
    """

    def __init__(
        self,
        volume: Any,
        tf: Any,
        comm: Any = None,
        algorithm: str = "radix-k",
        device: str | None = None,
        balance: bool = False,
        k: int = 8,
        shares: tuple[float, ...] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        local: LocalRenderer | None = None,
        share_cores: bool = True,
    ) -> None:
        self.comm = world() if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        guarded(
            lambda: compositing.schedule(algorithm, self.size, 1, k), "compositing", self.comm
        )
        self.algorithm, self.k, self.timeout = algorithm, k, timeout
        self.volume, self.tf = volume, tf

        def partition() -> Any:
            cost = None
            if balance:
                cost = cost_grid(volume.normalized, tf.lut()[:, 3])
            return kd_partition(volume.dims, self.size, volume.spacing, cost=cost, shares=shares)

        self.partition = guarded(partition, f"cannot split {volume.name} into {self.size} bricks",
                                 self.comm)  # fmt: skip
        self.brick = self.partition.bricks[self.rank]
        # the ranks on this machine split its cores (each pinned to its share, its OpenCL
        # device on that many threads) unless told not to or rendering with ``local``
        self.node = share_node(self.comm, apply=share_cores and local is None)
        if local is None:

            def make() -> Any:
                from raytracer.volume.raycaster import Raycaster  # lazy: loads pyopencl

                return Raycaster(volume, tf, self.brick, device)

            local = guarded(make, f"rank {self.rank}: ray caster set-up failed", self.comm)
        self.local: LocalRenderer = local
        #: this rank's OpenCL device kind: the clock its render work is measured in
        #: (:func:`work_clock`) and whether ranks share CPU cores in the model
        #: (models.core_sharing.shares_cores)
        self.device_kind = device_kind_of(local)
        self._frame = 0

    def prepare_steps(self, steps: Iterable[float]) -> None:
        """Set up this rank's renderer for these sample steps now, untimed (colour tables
        corrected for each step)."""
        self.local.prepare_steps(steps)

    @property
    def device_cache_bytes(self) -> int:
        """Bytes of this rank's OpenCL device's global memory cache, as the device reports it
        (``global_mem_cache_size``; 0 where the local renderer does not say)."""
        return int(getattr(self.local, "cache_bytes", 0))

    @property
    def frames_rendered(self) -> int:
        """Frames this renderer has rendered (the same on every rank: frames are collective)."""
        return self._frame

    def render_frame(
        self, camera: Camera, width: int, height: int, settings: FrameSettings
    ) -> FrameResult:
        """Render, composite and gather one frame (collective). Rank 0 gets the final
        (height, width, 4) premultiplied RGBA float32 image and the frame's record."""
        t0, cpu0 = time.perf_counter(), time.process_time()
        rw, rh = settings.render_size(width, height)
        order = self.partition.visibility_order(camera.eye)
        with watchdog("local render", self.timeout, self.comm):
            local = self.local.render(camera, rw, rh, settings.step, settings.ert_threshold)
        render_seconds = time.perf_counter() - t0
        cpu_seconds = time.process_time() - cpu0
        clock = work_clock(self.device_kind, cpu_seconds)
        rgba = np.ascontiguousarray(local.rgba, np.float32)
        # by messages: a new image each frame is never in the shared window, and "auto"
        # would spend a collective each frame finding that out (docs/volume-renderer.md says
        # why not the window)
        with watchdog("compositing", self.timeout, self.comm):
            result = compositing.composite(rgba, order, self.algorithm, self.comm, self.k,
                                           transport="messages")
        image, finish = None, 0.0
        if self.rank == 0:
            t1 = time.perf_counter()
            image = upscale(result.image, width, height)
            finish = time.perf_counter() - t1
        frame_seconds = time.perf_counter() - t0
        mine = RankTiming(
            self.rank, self.brick.index, render_seconds, float(local.kernel_seconds),
            int(local.samples), int(getattr(local, "skipped", 0)), int(local.rays),
            result.seconds, result.stages, result.gather, cpu_seconds,
            int(getattr(local, "group_samples", 0)), clock,
        )  # fmt: skip
        with watchdog("timing gather", self.timeout, self.comm):
            record = self._gather_record(mine, camera, settings, width, height, rw, rh, order)
        if record is not None:
            record.frame_seconds, record.finish_seconds = frame_seconds, finish
        self._frame += 1
        return FrameResult(image, record)

    def _gather_record(
        self,
        mine: RankTiming,
        camera: Camera,
        settings: FrameSettings,
        width: int,
        height: int,
        rw: int,
        rh: int,
        order: list[int],
    ) -> DistributedFrameRecord | None:
        vec = _encode(mine)
        table = np.empty((self.size, vec.size), np.float64) if self.rank == 0 else None
        if self.size > 1:
            self.comm.Gather(vec, table, root=0)
        elif table is not None:
            table[0] = vec
        if self.rank != 0:
            return None
        names = [s.name for s in compositing.schedule(self.algorithm, self.size, rw * rh, self.k)]
        partners = compositing.stage_partners(self.algorithm, order, rw * rh, self.k)
        ranks = [_decode(r, table[r], names, partners[r]) for r in range(self.size)]
        return DistributedFrameRecord(
            self._frame, tuple(map(float, camera.eye)), settings, self.algorithm, width, height,
            rw, rh, order, 0.0, 0.0, ranks,
        )  # fmt: skip

    def run(
        self,
        cameras: Iterable[Camera],
        width: int,
        height: int,
        settings: FrameSettings | Callable[[int], FrameSettings],
    ) -> Iterator[FrameResult]:
        """Render every camera in turn (collective); ``settings`` may be a function of the
        frame index, so a tuner can choose the knobs frame by frame."""
        for i, camera in enumerate(cameras):
            s = settings(i) if callable(settings) else settings
            yield self.render_frame(camera, width, height, s)


def load_everywhere(
    name_or_path: str,
    tf_spec: Any = None,
    comm: Any = None,
    dims: tuple[int, int, int] | None = None,
    dtype: str | None = None,
    spacing: tuple[float, float, float] | None = None,
) -> tuple[Any, Any]:
    """Every rank loads the volume and transfer function; a bad file, value or name raises
    the same error on every rank (the lowest failing rank's message) before any other
    collective, so no rank is left waiting."""
    volume = guarded(
        lambda: load_volume(name_or_path, dims=dims, dtype=dtype, spacing=spacing),
        "volume",
        comm,
    )
    tf = guarded(lambda: resolve_transfer_function(tf_spec, volume.name), "transfer function",
                 comm)  # fmt: skip
    return volume, tf
