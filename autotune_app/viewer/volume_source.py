"""``autotune view --volume NAME``: the distributed volume renderer in the viewer.

``mpiexec -n 4 autotune view --volume bonsai --target-ms 100`` (one process without mpiexec).
Every rank runs :func:`run_volume`. Rank 0 owns the window (or the offscreen framebuffer),
the input and the tuner, and drives the viewer's frame loop (``app.show``) through
:class:`VolumeSource`. Every frame the ``TunedVolumeRenderer`` on rank 0 chooses the knobs and
shares the frame's state once (``raytracer.volume.frame_sync``: the camera, the target, the
knobs, the controller, tuning on/off, the image size), then all ranks render the frame
collectively. Ranks >= 1 (:func:`follow`) only wait for that state and render; they never
load a window or OpenGL library. Every setting a key changes travels in the state, so it
applies on every rank from the same frame on.

Ending: Esc, closing the window, ``--frames`` or the end of ``--path`` end the loop between
frames, and rank 0 shares QUIT with the exit status, which every rank returns. Ctrl-C on rank 0
of a multi-rank job (:class:`Interrupts`; the other ranks ignore SIGINT, which the terminal
and mpiexec send them too) does the same, waiting for a frame's collectives to finish; while
the volume loads or the model calibrates it aborts the job. Bad input (volume, transfer
function, no display, the record folder) is decided on every rank before any collective and
printed once, by rank 0 (exit 2 everywhere); any other failure on any rank aborts the whole
job (``raytracer.mpi.faults.install_excepthook``), so no rank is ever left waiting.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune_app import options as opt
from autotune_app.report import tracking_figures
from autotune_app.viewer.errors import ViewerError
from autotune_app.viewer.source import FINISHED, INTERRUPTED, ViewFrame
from governed.volume.model_fit import volume_calibration_views
from governed.volume.tuned_volume import TunedVolumeRenderer
from raytracer.camera import Camera
from raytracer.mpi.faults import AgreedError, abort, agree, install_excepthook, world
from raytracer.volume.blend import to_rgb8
from raytracer.volume.distributed import DistributedRenderer, load_everywhere, seed_orbit
from raytracer.volume.frame_sync import CALIBRATE, QUIT


def rank_state(tuned: Any) -> dict[str, Any]:
    """This rank's settings (rank 0 gathers them at the end: they must agree)."""
    return {"rank": tuned.rank, "target_ms": tuned.target_seconds * 1e3,
            "controller": tuned.controller, "tuning": tuned.tuning,
            "width": tuned.width, "height": tuned.height}


def follow(tuned: Any, views: list[Camera], calibration_frames: int) -> int:
    """Ranks >= 1: calibrate and render as rank 0 says until QUIT; returns its status."""
    while True:
        state = tuned.sync.receive()
        if state.op == QUIT:
            tuned.restore(state)
            tuned.comm.gather(rank_state(tuned), root=0)
            return state.status
        if state.op == CALIBRATE:
            tuned.calibrate(views, frames=calibration_frames)
        else:
            tuned.follow(state)


class Interrupts:
    """Ctrl-C on rank 0 of a multi-rank job. Between frames it raises KeyboardInterrupt (the
    viewer then ends the run like Esc and every rank quits); during a frame it is held until
    the frame's collectives are done; while the job loads or calibrates (long collective
    blocks) it aborts the job."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.phase = "setup"  # setup, calibrating, idle (between frames), frame, done
        self.pending = False
        self._previous: Any = None

    def install(self) -> None:
        self._previous = signal.signal(signal.SIGINT, self)

    def restore(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def __call__(self, signum: int, frame: Any) -> None:
        if self.phase in ("setup", "calibrating"):
            abort(self.comm, INTERRUPTED, "autotune view: interrupted; ending every rank")
        if self.phase == "frame":
            self.pending = True
        elif self.phase == "idle":
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def during(self, phase: str) -> Iterator[None]:
        """Mark a collective block; a Ctrl-C held during a frame is raised after it."""
        self.phase = phase
        yield
        self.phase = "idle"
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


@dataclass
class VolumeFrameLog:
    """What one governed volume frame measured, predicted and chose (for the summary)."""

    frame: int
    target: float
    measured: float
    predicted: float
    corrected: float
    probe_seconds: float
    over_budget: bool
    sampling_rate: float
    image_scale: float
    ert_threshold: float
    render_ms: float  # rank 0's local render
    render_max_ms: float  # the slowest rank's
    composite_ms: float
    gather_ms: float


def frame_columns(record: Any) -> dict[str, float]:
    """Rank 0's frame split into its phases (ms) from a ``DistributedFrameRecord``."""
    r0 = record.ranks[0]
    return {"render_ms": 1e3 * r0.render_seconds, "render_max_ms": 1e3 * record.render_max,
            "composite_ms": 1e3 * (r0.composite_seconds - r0.gather.seconds),
            "gather_ms": 1e3 * r0.gather.seconds, "upscale_ms": 1e3 * record.finish_seconds}


class VolumeSource:
    """Rank 0's side: the governed distributed volume renderer as the viewer drives it."""

    fields = ("sampling_rate", "step", "image_scale", "ert_threshold", "render_width",
              "render_height", "render_ms", "render_max_ms", "composite_ms", "gather_ms",
              "upscale_ms")
    help: list[str] = []

    def __init__(self, tuned: Any, views: list[Camera], calibration_frames: int,
                 interrupts: Interrupts, volume: Any, tf: Any) -> None:
        self.tuned, self.views, self.interrupts = tuned, views, interrupts
        self.calibration_frames = calibration_frames
        renderer = self.tuned.renderer
        self.volume, self.tf, self.ranks = volume, tf, renderer.size
        self.label = f"{volume.name}, {self.ranks} rank{'s' if self.ranks > 1 else ''}"
        info = getattr(renderer.local, "device_info", None)
        self.device = info.name if info is not None else type(renderer.local).__name__
        self.home = seed_orbit(volume.radius, 1)[0]
        self.extent = 2.0 * volume.radius
        self.target_seconds, self.tuning = self.tuned.target_seconds, True
        self.controller = self.tuned.controller
        self.size = (self.tuned.width, self.tuned.height)
        self.calibration_seconds = 0.0
        self.states: list[dict[str, Any]] = []
        self.frames = 0

    def set_controller(self, name: str) -> None:
        self.controller = name

    def key(self, key: int, mods: int) -> bool:
        return False

    def resize(self, width: int, height: int) -> None:
        self.size = (width, height)

    def _apply(self) -> None:
        """What the keys changed since the last frame, into rank 0's tuned renderer (its
        next shared state takes it to every rank)."""
        t = self.tuned
        t.target_seconds = self.target_seconds
        if self.size != (t.width, t.height):
            t.resize(*self.size)
        if self.controller != t.controller:
            t.use_controller(self.controller)
        t.tuning = self.tuning

    def start(self, show: Callable[[str], None]) -> None:
        """Calibrate the per-rank model on every rank (off the views a user starts from),
        showing progress in the window and on stderr."""
        self.interrupts.phase = "calibrating"
        self.tuned.sync.share(self.tuned.state(CALIBRATE))
        t0 = time.perf_counter()
        frames = 0
        live = sys.stderr.isatty()  # a progress line that rewrites itself

        def each() -> None:
            nonlocal frames
            frames += 1
            text = (f"calibrating the per-rank model on {self.ranks} rank(s): frame {frames}, "
                    f"{time.perf_counter() - t0:.0f} s")
            if live:
                print(f"\r{text}", end="", file=sys.stderr, flush=True)
            show(text)

        print(f"calibrating on {len(self.views)} views ({self.calibration_frames} "
              f"frames + quality sweeps)...", file=sys.stderr, flush=True)
        with self.interrupts.during("calibrating"), _counting(self.tuned.renderer, each):
            self.tuned.calibrate(self.views, frames=self.calibration_frames)
        self.calibration_seconds = time.perf_counter() - t0
        print(f"{chr(10) if live else ''}calibrated in {self.calibration_seconds:.1f} s "
              f"({frames} frames)",
              file=sys.stderr, flush=True)

    def render(self, camera: Camera) -> ViewFrame:
        with self.interrupts.during("frame"):
            self._apply()
            f = self.tuned.render(camera)
        s, rec = f.settings, f.record
        cols = frame_columns(rec)
        rate = 1.0 / s.step
        knobs = (f"sampling rate {rate:.2f}/voxel  image scale {s.image_scale:.2f} "
                 f"({rec.render_width}x{rec.render_height})  ERT {s.ert_threshold:.2f}  "
                 f"slowest rank {cols['render_max_ms']:.1f} ms")
        log = VolumeFrameLog(self.frames, self.target_seconds, f.measured, f.predicted,
                             f.corrected, f.probe_seconds, f.over_budget, rate, s.image_scale,
                             s.ert_threshold, cols["render_ms"], cols["render_max_ms"],
                             cols["composite_ms"], cols["gather_ms"])
        cols.update(sampling_rate=rate, step=s.step, image_scale=s.image_scale,
                    ert_threshold=s.ert_threshold, render_width=rec.render_width,
                    render_height=rec.render_height)
        self.frames += 1
        return ViewFrame(to_rgb8(f.image), f.measured, f.predicted, f.corrected,
                         f.probe_seconds, f.over_budget, knobs, cols, log)

    def finish(self, status: int) -> None:
        """Tell every rank to quit with ``status`` and gather their settings. Not when the
        run failed inside a collective block: the others wait there, and the failure
        aborts the job (``install_excepthook``)."""
        phase, self.interrupts.phase = self.interrupts.phase, "done"
        self.interrupts.restore()
        if phase in ("frame", "calibrating"):
            return
        self.tuned.sync.share(self.tuned.state(QUIT, status=status))
        state = rank_state(self.tuned)
        self.states = self.tuned.comm.gather(state, root=0) if self.ranks > 1 else [state]

    def summary(self, logs: list[VolumeFrameLog]) -> tuple[dict[str, Any], str]:
        figures = tracking_figures(logs)
        for key in ("sampling_rate", "image_scale", "ert_threshold"):
            figures[f"mean_{key}"] = float(np.mean([getattr(x, key) for x in logs]))
        mean = {k: float(np.mean([getattr(x, k) for x in logs]))
                for k in ("render_ms", "render_max_ms", "composite_ms", "gather_ms")}
        line = (f"rank 0's frame, mean: local render {mean['render_ms']:.1f} ms (slowest of "
                f"{self.ranks} rank(s) {mean['render_max_ms']:.1f}), compositing "
                f"{mean['composite_ms']:.1f}, gather {mean['gather_ms']:.1f}; model calibrated "
                f"in {self.calibration_seconds:.1f} s")
        return figures, line

    def run_info(self) -> dict[str, Any]:
        keys = ("target_ms", "controller", "tuning", "width", "height")
        return {
            "volume": self.volume.name, "dims": list(self.volume.dims),
            "transfer_function": self.tf.name, "ranks": self.ranks,
            "algorithm": self.tuned.renderer.algorithm, "device": self.device,
            "controlled_time": "rank 0: probe + choice + render + compositing + gather + "
                               "upscale",
            "calibration_frames": self.calibration_frames,
            "calibration_seconds": self.calibration_seconds,
            "ranks_at_end": self.states,
            "ranks_agree": all({k: s[k] for k in keys} == {k: self.states[0][k] for k in keys}
                               for s in self.states),
        }


@contextlib.contextmanager
def _counting(renderer: Any, each: Callable[[], None]) -> Iterator[None]:
    """Call ``each()`` before every frame ``renderer`` renders inside the block."""
    inner = renderer.render_frame

    def counted(*args: Any, **kwargs: Any) -> Any:
        each()
        return inner(*args, **kwargs)

    renderer.render_frame = counted
    try:
        yield
    finally:
        del renderer.render_frame


def run_volume(args: argparse.Namespace) -> int:
    """``autotune view --volume`` on every rank; returns the exit status. On rank 0 a
    ViewerError or KeyboardInterrupt of the run propagates (after every rank was told to
    quit with the same status) for ``run_view`` to print once."""
    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    interrupts = Interrupts(comm)
    if size > 1:
        install_excepthook(comm)
        if rank == 0:
            interrupts.install()
        else:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return _run(args, comm, interrupts)
    except AgreedError as exc:  # the same on every rank, before any collective
        if rank == 0:
            print(f"autotune view: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except Exception as exc:
        if size > 1 and not isinstance(exc, ViewerError):
            sys.excepthook(type(exc), exc, exc.__traceback__)  # ends every rank
        raise
    finally:
        interrupts.restore()


def _run(args: argparse.Namespace, comm: Any, interrupts: Interrupts) -> int:
    rank = comm.Get_rank()
    surface = path = record_dir = None
    problem = ""
    if rank == 0:
        from autotune_app.viewer import app  # lazy: glfw/moderngl, which only rank 0 loads

        try:
            path, record_dir = app.prepare(args)
            surface = app.open_surface(args, f"autotune view: {args.volume}")
        except ViewerError as exc:
            problem = str(exc)
    try:
        agree(not problem, problem, comm)
        volume, tf = load_everywhere(args.volume, args.tf, comm)
        renderer = DistributedRenderer(volume, tf, comm, device=args.device)
        tuned = TunedVolumeRenderer(renderer, args.width, args.height,
                                    opt.target_seconds(args), controller=args.controller,
                                    probe_policy=args.probe_policy)
    except BaseException:
        if surface is not None:
            surface.close()
        raise
    views = volume_calibration_views(volume.radius)
    if rank != 0:
        return follow(tuned, views, args.calibration_frames)
    interrupts.phase = "idle"
    source = VolumeSource(tuned, views, args.calibration_frames, interrupts, volume, tf)
    app.show(args, surface, source, path, record_dir)
    return FINISHED
