"""Data for the cluster model: histograms from real runs, emulation runs, training rows.

The cluster study: Tkachev, Frey, Müller, Bruder, Ertl, "Prediction of Distributed Volume
Visualization Performance to Support Render Hardware Acquisition".

- :func:`run_real` renders a camera path on a communicator and returns every rank's local
  render seconds per frame (the (frames, ranks) table a
  :class:`~studies.cluster_prediction.perf_histogram.PathHistogram` is made of) and rank 0's
  frame times.
- :func:`run_node` is the cheap measurement of a node on its own: one process renders every
  brick of a P-rank partition in turn, frame by frame, on a camera path of the caller's
  choice (the same table, without compositing or any other rank).
- :func:`emulation_times` draws the (frames, ranks) sleep times of an emulation run from a
  histogram: from the one histogram of the whole path (the paper), from each frame's own
  histogram (``per-frame``: a distribution of distributions), or each rank's average time in
  every frame (``vector``, the paper's Fig. 5a baseline).
- :func:`run_emulation` runs one configuration (image size x ranks x histogram x mode) with
  :class:`~studies.cluster_prediction.emulation.EmulatedRenderer` and returns its training row;
  :func:`run_plan` runs a list of them in one MPI job, each on a sub-communicator of its
  rank count (idle ranks wait without spinning), handing every finished row to a sink.
- :class:`TrainingData`: the versioned rows (resumable: a plan skips the keys already there),
  with one clear error naming the file for a missing field, a NaN, or another version.

Nothing here writes files: the caller's sink does (benchmarks/studies/cluster_prediction.py
writes each row atomically through common.atomic_files).
"""

from __future__ import annotations

import math
import os
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from raytracer.volume.distributed import (
    DistributedFrameRecord,
    DistributedRenderer,
    FrameSettings,
    seed_orbit,
)
from raytracer.volume.partition import kd_partition
from raytracer.volume.span_blend import kernels
from studies.cluster_prediction.emulation import EmulatedRenderer, SlowLinks
from studies.cluster_prediction.model import features
from studies.cluster_prediction.perf_histogram import HistogramError, PathHistogram

DATA_VERSION = 1
DATA_KIND = "autotune-cluster-training-data"
MODES = ("histogram", "per-frame", "vector")
ALGORITHM = "2-3-swap"  # the cluster study's compositing scheme
#: networks an emulation run can composite over: this machine's shared memory, or the same
#: with every message delayed by an emulated link (latency s, bandwidth B/s), a slow network
LINKS: dict[str, tuple[float, float] | None] = {"shm": None, "slow": (2e-3, 100e6)}


def network(comm: Any, name: str) -> Any:
    """``comm`` as the named network (:data:`LINKS`)."""
    if name not in LINKS:
        raise ValueError(f"unknown network {name!r}; choose from {', '.join(LINKS)}")
    link = LINKS[name]
    return comm if link is None else SlowLinks(comm, *link)


class TrainingDataError(ValueError):
    """Training data cannot be used; the message names the file (or row) and the problem."""


# ------------------------------------------------------------------------------ real runs


def path_times(records: Sequence[DistributedFrameRecord]) -> NDArray[np.float64]:
    """(frames, ranks) local render wall seconds of recorded frames (rank order)."""
    if not records:
        raise HistogramError("no frames recorded")
    return np.array([[r.render_seconds for r in sorted(rec.ranks, key=lambda r: r.rank)]
                     for rec in records], np.float64)


def first_ranks(comm: Any, ranks: int) -> Any:
    """The sub-communicator of the first ``ranks`` ranks (None on the others); collective."""
    from mpi4py import MPI  # lazy: importing it initialises MPI

    if ranks == comm.Get_size():
        return comm
    inside = comm.Get_rank() < ranks
    sub = comm.Split(0 if inside else MPI.UNDEFINED, comm.Get_rank())
    return sub if inside else None


def idle_barrier(comm: Any, poll: float = 0.002) -> None:
    """A barrier whose waiting costs no CPU (non-blocking barrier + sleep), so idle ranks do
    not steal the cores of the ranks being measured on an oversubscribed machine."""
    if comm.Get_size() == 1:
        return
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(poll)


def warm_blend() -> None:
    """Load both numba blend kernels in this process now: each costs ~1 s (3 s on the loaded
    machine) on its first call, which otherwise lands in whichever timed frame first needs it
    (a 2-3 swap group can need the second kernel only at some views)."""
    over, under = kernels()
    a, b = np.zeros(64, np.float32), np.zeros(64, np.float32)
    over(a, b)
    under(a, b)


@dataclass
class RealRun:
    """A rendered path: per-rank render seconds, rank 0's frame and compositing seconds."""

    render_seconds: NDArray[np.float64]  # (frames, ranks)
    frame_seconds: NDArray[np.float64]  # (frames,)
    composite_seconds: NDArray[np.float64]  # (frames,) rank 0: all stages + gather


def run_real(comm: Any, volume: Any, tf: Any, width: int, height: int, frames: int,
             step: float, algorithm: str = ALGORITHM, warmup: int = 1) -> RealRun | None:
    """Render the paper's orbit (``frames`` views, two turns) with the ray caster on ``comm``
    (collective); rank 0 gets the :class:`RealRun`, the others None."""
    renderer = DistributedRenderer(volume, tf, comm, algorithm, share_cores=False)
    warm_blend()
    cams = seed_orbit(volume.radius, frames)
    settings = FrameSettings(step=step)
    for cam in cams[:warmup]:
        renderer.render_frame(cam, width, height, settings)
    records = [res.record for res in renderer.run(cams, width, height, settings)]
    if comm.Get_rank() != 0:
        return None
    recs = [r for r in records if r is not None]
    return RealRun(path_times(recs), np.array([r.frame_seconds for r in recs]),
                   np.array([r.ranks[0].composite_seconds for r in recs]))


def run_node(volume: Any, tf: Any, ranks: int, sizes: Sequence[int], steps: Sequence[float],
             cameras: Sequence[Any], warmup: int = 1) -> dict[tuple[float, int], NDArray]:
    """One process renders each of the ``ranks`` bricks of the k-d partition (as a
    :class:`~raytracer.volume.distributed.DistributedRenderer` of that many ranks splits it)
    in turn, for every camera: the (frames, ranks) local render wall seconds for each
    (step, square image size), with ``warmup`` untimed frames first."""
    from raytracer.volume.raycaster import Raycaster  # lazy: loads pyopencl (emulation does not)

    bricks = kd_partition(volume.dims, ranks, volume.spacing).bricks
    casters = [Raycaster(volume, tf, brick) for brick in bricks]
    out = {}
    for step in steps:
        for size in sizes:
            for cam in cameras[:warmup]:
                for caster in casters:
                    caster.render(cam, size, size, step)
            out[(step, size)] = np.array([[_timed_render(c, cam, size, step) for c in casters]
                                          for cam in cameras], np.float64)
    return out


def _timed_render(caster: Any, camera: Any, size: int, step: float) -> float:
    t = time.perf_counter()
    caster.render(camera, size, size, step)
    return time.perf_counter() - t


# ---------------------------------------------------------------------------- emulation


def emulation_times(hist: PathHistogram, frames: int, ranks: int, mode: str,
                    seed: int) -> NDArray[np.float64]:
    """(frames, ranks) local render seconds to sleep, drawn from ``hist`` (see module doc)."""
    rng = np.random.default_rng(seed)
    if mode == "histogram":
        return hist.sample_frames(rng, frames, ranks, per_frame=False)
    if mode == "per-frame":
        if not hist.per_frame:
            raise HistogramError("per-frame emulation needs per-frame histograms, got none")
        return hist.sample_frames(rng, frames, ranks, per_frame=True)
    if mode == "vector":
        means = np.asarray(hist.meta.get("rank_means", []), np.float64)
        if means.size != ranks:
            raise HistogramError(f"vector emulation needs {ranks} per-rank mean times, the "
                                 f"histogram has {means.size}")
        return np.tile(means, (frames, 1))
    raise ValueError(f"unknown emulation mode {mode!r}; choose from {', '.join(MODES)}")


@dataclass(frozen=True)
class EmulationConfig:
    """One emulation run: a histogram (by id) at an image size on a rank count."""

    hist: str
    width: int
    height: int
    ranks: int
    mode: str = "histogram"
    frames: int = 24
    network: str = "shm"

    @property
    def key(self) -> str:
        return (f"{self.hist}|{self.width}x{self.height}|{self.ranks}|{self.mode}|"
                f"{self.frames}|{self.network}")

    @property
    def seed(self) -> int:
        return zlib.crc32(self.key.encode())


def run_emulation(comm: Any, config: EmulationConfig, hist: PathHistogram, source: str = "",
                  algorithm: str = ALGORITHM, warmup: int = 1) -> dict[str, Any] | None:
    """Run one configuration on ``comm`` (its size must be ``config.ranks``; collective).
    Rank 0 returns the training row: the mean of rank 0's frame seconds over the path, the
    histogram's features, and what the frames spent rendering and compositing."""
    if comm.Get_size() != config.ranks:
        raise ValueError(f"{config.key}: needs {config.ranks} ranks, got {comm.Get_size()}")
    times = emulation_times(hist, config.frames + warmup, config.ranks, config.mode, config.seed)
    rank = comm.Get_rank()
    local = EmulatedRenderer(times[:, rank], seed=config.seed + rank)
    local.prepare(config.width, config.height)
    warm_blend()
    renderer = DistributedRenderer(EmulationVolume(), None, network(comm, config.network),
                                   algorithm, local=local)
    cams = seed_orbit(128.0 * math.sqrt(3.0), config.frames + warmup)
    settings = FrameSettings()
    recs = [renderer.render_frame(cam, config.width, config.height, settings).record
            for cam in cams][warmup:]
    if rank != 0:
        return None
    frame = np.array([r.frame_seconds for r in recs])
    return {
        "key": config.key, **asdict(config), "source": source, "algorithm": algorithm,
        "frame_seconds": float(frame.mean()),
        "frame_seconds_std": float(frame.std()),
        "frame_times": frame.tolist(),
        "load_avg": float(os.getloadavg()[0]),
        "render_max_seconds": float(np.mean([r.render_max for r in recs])),
        "composite_seconds": float(np.mean([r.ranks[0].composite_seconds for r in recs])),
        "asked_max_seconds": float(times[warmup:].max(axis=1).mean()),
        "features": hist.overall.features().tolist(),
        "spread": hist.frame_spread().tolist(),
    }


@dataclass(frozen=True)
class EmulationVolume:
    """A volume stand-in for emulation: the k-d partition (and so the compositing order of a
    view) needs only the dimensions; nothing is loaded or rendered."""

    dims: tuple[int, int, int] = (256, 256, 256)
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0)
    name: str = "emulated"


def run_plan(comm: Any, configs: Sequence[EmulationConfig],
             histograms: Mapping[str, tuple[PathHistogram, str]],
             sink: Callable[[dict[str, Any]], None] | None = None,
             progress: Callable[[EmulationConfig], None] | None = None) -> list[dict[str, Any]]:
    """Run every configuration in one job (collective on ``comm``, which must have at least the
    largest rank count): each on the sub-communicator of its first ``ranks`` ranks while the
    others wait in :func:`idle_barrier`. Rank 0 hands each row to ``sink`` as it finishes
    (write it there: a crash loses only the running configuration) and returns them all."""
    size = comm.Get_size()
    if any(c.ranks > size for c in configs):
        raise ValueError(f"the plan needs {max(c.ranks for c in configs)} ranks, the job has "
                         f"{size}")
    rows: list[dict[str, Any]] = []
    subs: dict[int, Any] = {}
    for config in sorted(configs, key=lambda c: c.ranks):
        if config.ranks not in subs:
            subs[config.ranks] = first_ranks(comm, config.ranks)
        sub = subs[config.ranks]
        if sub is not None:
            hist, source = histograms[config.hist]
            row = run_emulation(sub, config, hist, source)
            if row is not None:
                rows.append(row)
                if sink is not None:
                    sink(row)
        if comm.Get_rank() == 0 and progress is not None:
            progress(config)
        idle_barrier(comm)
    return rows


# -------------------------------------------------------------------------- the data file

REQUIRED = {"key": str, "hist": str, "width": int, "height": int, "ranks": int, "mode": str,
            "frames": int, "network": str, "frame_seconds": float, "features": list,
            "spread": list}


@dataclass
class TrainingData:
    """Rows of emulation runs (see :func:`run_emulation`), versioned."""

    rows: list[dict[str, Any]]
    meta: dict[str, Any]

    @classmethod
    def empty(cls, meta: Mapping[str, Any] | None = None) -> TrainingData:
        return cls([], dict(meta or {}))

    def keys(self) -> set[str]:
        return {r["key"] for r in self.rows}

    def pending(self, configs: Iterable[EmulationConfig]) -> list[EmulationConfig]:
        """The configurations not yet in the data (what a resumed run still has to do)."""
        done = self.keys()
        return [c for c in configs if c.key not in done]

    def add(self, row: Mapping[str, Any], where: str = "new row") -> None:
        _check_row(row, where)
        self.rows = [r for r in self.rows if r["key"] != row["key"]] + [dict(row)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": DATA_KIND, "version": DATA_VERSION, "meta": self.meta,
                "rows": self.rows}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> TrainingData:
        if not isinstance(d, Mapping) or d.get("kind") != DATA_KIND:
            raise TrainingDataError(f"{where}: not autotune cluster training data")
        if d.get("version") != DATA_VERSION:
            raise TrainingDataError(f"{where}: training data version {d.get('version')!r}; "
                                    f"this version reads {DATA_VERSION} (regenerate it)")
        rows = d.get("rows")
        if not isinstance(rows, list):
            raise TrainingDataError(f"{where}: 'rows' must be a list")
        for i, row in enumerate(rows):
            _check_row(row, f"{where}: row {i}")
        return cls([dict(r) for r in rows], dict(d.get("meta") or {}))

    def select(self, **match: Any) -> list[dict[str, Any]]:
        """Rows whose fields equal ``match`` (a callable value is a predicate on the field)."""
        def ok(r: Mapping[str, Any]) -> bool:
            return all(v(r.get(k)) if callable(v) else r.get(k) == v for k, v in match.items())
        return [r for r in self.rows if ok(r)]


def _check_row(row: Any, where: str) -> None:
    if not isinstance(row, Mapping):
        raise TrainingDataError(f"{where}: not an object")
    for name, kind in REQUIRED.items():
        if name not in row or row[name] is None:
            raise TrainingDataError(f"{where}: missing field {name!r}")
        value = row[name]
        if kind in (int, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TrainingDataError(f"{where}: field {name!r} must be a number, got "
                                        f"{value!r}")
            if not math.isfinite(value) or value < 0 or (kind is int and value < 1):
                raise TrainingDataError(f"{where}: field {name!r} is {value!r} (NaN, infinite "
                                        "or out of range)")
        elif not isinstance(value, kind):
            raise TrainingDataError(f"{where}: field {name!r} must be a {kind.__name__}")
    for name, n in (("features", 13), ("spread", 3)):
        v = row[name]
        if len(v) != n or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in v):
            raise TrainingDataError(f"{where}: field {name!r} needs {n} finite numbers")
    if row["frame_seconds"] <= 0:
        raise TrainingDataError(f"{where}: frame_seconds must be > 0")


def training_arrays(rows: Sequence[Mapping[str, Any]], spread: bool = False
                    ) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """(x, y seconds, pixels, ranks) of rows for
    :func:`studies.cluster_prediction.model.fit_cluster_model`; ``spread`` adds the per-frame
    features (the distribution of distributions)."""
    px = np.array([r["width"] * r["height"] for r in rows], np.float64)
    rk = np.array([r["ranks"] for r in rows], np.float64)
    hf = np.array([r["features"] for r in rows], np.float64)
    if spread:
        hf = np.column_stack([hf, np.array([r["spread"] for r in rows], np.float64)])
    return features(px, rk, hf), np.array([r["frame_seconds"] for r in rows]), px, rk
