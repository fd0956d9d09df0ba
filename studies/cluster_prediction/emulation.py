"""Emulated local rendering: sleep for a given time, return a real-sized image.

The emulation of the cluster study (Tkachev, Frey, Müller, Bruder, Ertl: "Prediction of
Distributed Volume Visualization Performance to Support Render Hardware Acquisition", §4).

An :class:`EmulatedRenderer` stands in for the OpenCL ray caster of one rank in
:class:`~raytracer.volume.distributed.DistributedRenderer` (its ``local`` argument). Each
frame it returns a full-size premultiplied RGBA float32 image of random content (seeded per
rank, generated once per size) after exactly the local render time the caller gave for that
frame, so the compositing that follows moves and blends as many bytes as a real frame would.
Sleeping costs no CPU, so many more ranks than cores can be emulated on one machine.

The times come from the caller, one per frame for this rank (they cycle when the path is
longer); this library knows nothing of histograms
(studies/cluster_prediction/perf_histogram.py draws them).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class EmulatedImage:
    """What :meth:`EmulatedRenderer.render` returns (the fields the frame loop reads)."""

    rgba: np.ndarray
    kernel_seconds: float  # the emulated render time asked for
    samples: int = 0
    skipped: int = 0
    rays: int = 0
    overrun: float = 0.0  # seconds past the asked time (copying the image took longer)


def random_premultiplied(width: int, height: int, seed: int) -> np.ndarray:
    """(height, width, 4) float32 premultiplied RGBA: alpha in [0, 1), colour <= alpha."""
    rng = np.random.default_rng(seed)
    img = rng.random((height, width, 4), dtype=np.float32)
    img[..., :3] *= img[..., 3:4]
    return img


class EmulatedRenderer:
    """A local renderer that sleeps ``seconds[frame]`` and returns random premultiplied data.

    ``seconds``: this rank's local render time for each frame of the path (cycled).
    ``seed``: seeds the image content (use a different one per rank). The time spent making
    the frame's image (a copy of the cached random image, which compositing overwrites) is
    part of the emulated time: the call returns ``seconds[frame]`` after it started, or as
    soon as the copy is done when that takes longer (``overrun`` says by how much).
    """

    def __init__(self, seconds: Sequence[float] | np.ndarray, seed: int = 0) -> None:
        times = np.asarray(seconds, np.float64).ravel()
        if times.size == 0:
            raise ValueError("emulation needs at least one render time, got none")
        if not np.all(np.isfinite(times)) or np.any(times < 0):
            bad = times[~np.isfinite(times) | (times < 0)][0]
            raise ValueError(f"emulated render times must be finite and >= 0, got {bad}")
        self.seconds = times
        self.seed = int(seed)
        self.frame = 0
        self._cache: dict[tuple[int, int], np.ndarray] = {}

    def image(self, width: int, height: int) -> np.ndarray:
        """The cached random image of this size (generated on first use)."""
        key = (int(width), int(height))
        if key not in self._cache:
            self._cache.clear()  # one size at a time: 2048² is 64 MiB
            self._cache[key] = random_premultiplied(width, height, self.seed)
        return self._cache[key]

    def prepare(self, width: int, height: int) -> None:
        """Generate the image of this size now (outside any timed frame)."""
        self.image(width, height)

    def prepare_steps(self, steps: Iterable[float]) -> None:
        """Nothing to set up: an emulated render's time does not depend on the step."""

    def render(
        self, camera: object, width: int, height: int, step: float = 1.0,
        ert_threshold: float = 1.0,
    ) -> EmulatedImage:
        """Emulate one frame's local render (camera, step and threshold do not matter)."""
        start = time.perf_counter()
        wanted = float(self.seconds[self.frame % self.seconds.size])
        self.frame += 1
        rgba = self.image(width, height).copy()
        left = wanted - (time.perf_counter() - start)
        if left > 0:
            _sleep_until(start + wanted)
        overrun = max(0.0, time.perf_counter() - start - wanted)
        return EmulatedImage(rgba, wanted, 0, 0, width * height, overrun)


def _sleep_until(deadline: float) -> None:
    """Sleep to ``deadline`` (perf_counter seconds): coarse sleep, then a short fine wait."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return
        time.sleep(left - 0.0005 if left > 0.002 else min(left, 0.0002))


def _nbytes(buf: object) -> int:
    """Bytes of an mpi4py buffer spec (``array`` or ``[array, datatype, ...]``)."""
    if isinstance(buf, (list, tuple)):
        buf = buf[0]
    return int(getattr(buf, "nbytes", 0))


class SlowLinks:
    """A communicator whose messages pay an emulated network link (a link model, on purpose).

    Every point-to-point send (``Send``, ``Isend``, ``Sendrecv``) first sleeps ``latency +
    bytes / bandwidth`` (the sender's link serialises its messages); the root of a
    ``Gatherv`` sleeps ``(P − 1) · latency + received bytes / bandwidth`` after it (its one
    link receives every piece). Everything else is the wrapped communicator's own. Used to
    measure a slower network than shared memory on one machine, with real compositing.
    """

    def __init__(self, comm: object, latency: float, bandwidth: float) -> None:
        if not (latency >= 0 and bandwidth > 0 and math.isfinite(latency + bandwidth)):
            raise ValueError(f"link needs latency >= 0 and bandwidth > 0, got {latency}, "
                             f"{bandwidth}")
        self._comm, self.latency, self.bandwidth = comm, float(latency), float(bandwidth)

    def __getattr__(self, name: str) -> object:
        return getattr(self._comm, name)

    def _pay(self, nbytes: int, messages: int = 1) -> None:
        _sleep_until(time.perf_counter() + messages * self.latency + nbytes / self.bandwidth)

    def Send(self, buf: object, dest: int, tag: int = 0) -> None:  # noqa: N802 - mpi4py name
        self._pay(_nbytes(buf))
        self._comm.Send(buf, dest, tag)

    def Isend(self, buf: object, dest: int, tag: int = 0) -> object:  # noqa: N802
        self._pay(_nbytes(buf))
        return self._comm.Isend(buf, dest, tag)

    def Sendrecv(self, sendbuf: object, dest: int, *args: object, **kwargs: object) -> None:  # noqa: N802
        self._pay(_nbytes(sendbuf))
        self._comm.Sendrecv(sendbuf, dest, *args, **kwargs)

    def Gatherv(self, sendbuf: object, recvbuf: object, root: int = 0) -> None:  # noqa: N802
        self._comm.Gatherv(sendbuf, recvbuf, root)
        if self._comm.Get_rank() == root and self._comm.Get_size() > 1:
            counts = recvbuf[1] if isinstance(recvbuf, (list, tuple)) and len(recvbuf) > 2 else []
            itemsize = getattr(recvbuf[0], "itemsize", 4) if counts else 4
            own = counts[root] if counts else 0
            self._pay(int((sum(counts) - own) * itemsize), self._comm.Get_size() - 1)
