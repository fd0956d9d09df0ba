"""How each kernel (the tracer's four, the volume caster) is launched on a device: its
work-group shape, where the driver takes one a required sub-group size, and for a kernel that
has a packet form (the caster: raytracer/volume/kernels/raycast_packet.cl; the tracer's
primary and shadow rays: raytracer/mesh/kernels/primary_packet.cl, shadow_packet.cl) the pixels one
work-item casts in explicit vector lanes; chosen per device by timing the candidates once,
cached.

Intel's CPU runtime decides by itself whether a kernel's work-items run in SIMD lanes, and its
decision is not the fast one for every kernel. Measured on a 2-core Zen 5 (dragon, 1280x720,
one compute unit): with the OpenCL builtins ``dot`` and ``normalize`` the shade kernel ran one
work-item at a time in every group shape (38 ms); asked for sub-groups of 16
(``cl_intel_required_subgroup_size``) in 16x4 groups it ran in lanes, 16.2 ms, the image
bit-identical. With both written out (rtmath.cl) the runtime runs it in lanes by itself in
16x4 groups (12 ms against 32 in 8x8). The traversal kernels run one work-item at a time too
(with the runtime's vectorizer turned off, ``CL_CONFIG_CPU_VECTORIZER_MODE=1``, their times do
not change), and in lanes they are 12-15x slower, so measurement keeps the default for them.
On a device without the extension (PoCL, GPU drivers) the default is the only candidate,
but for a kernel's packets: on every device they are timed against the default (a GPU, whose
work-items already run in lanes, is expected to keep the default).

Every candidate is a 64-item group (the cost model's threads per block). A candidate replaces
the default, or one listed before it, only when it is faster by more than :data:`MARGIN`
(:func:`choose`), and the device's SIMD width is the first sub-group size tried (for the shade
kernel sizes 8, 16 and 32 time within 5-15 % of each other, and a plain "fastest" flipped
between them from run to run), so that timing noise does not flip a choice between runs or
machines of one kind: calibrations record the choice they were fitted with
(:attr:`KernelLaunches.signature`).
The choice lives in ``<cache>/launches/<device key>-<source digest>.json``; another device,
driver, CPU or kernel source measures again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyopencl as cl

from common.cache_folder import cache_dir
from raytracer.device.runtimes import store_cache_file
from raytracer.device.traits import traits_key
from raytracer.mesh.phases import TILE, simd_lanes

log = logging.getLogger(__name__)

SUB_GROUP_EXTENSION = "cl_intel_required_subgroup_size"
SUB_GROUP_SIZES = (8, 16, 32)
SHAPES = ((TILE, TILE), (16, 4), (32, 2))  # 64 work-items each
MARGIN = 0.8  # chosen: the first launch taking at most 1 / MARGIN of the fastest one's time
ROUNDS = 3  # timed rounds over the candidates, after a warm-up round
PRUNE = 2.0  # a launch this many times its kernel's best is not timed again
MIN_TIMED = 0.02  # seconds of kernel time a timing gathers at least (a short kernel repeats)
MAX_REPEATS = 16  # launches one timing makes at most
CACHE_VERSION = 3  # 3: short kernels timed repeatedly (choices timed once each are redone)
#: lanes a packet may have: the OpenCL vector widths (float2 ... float16)
PACKET_LANES = (2, 4, 8, 16)


@dataclass(frozen=True)
class Launch:
    """One way to launch a kernel: work-group (x, y) in work-items, required sub-group size
    (0: the driver's choice) and packet (x, y): the pixels each work-item casts in explicit
    vector lanes ((1, 1): one pixel, scalar code)."""

    group: tuple[int, int] = (TILE, TILE)
    sub_group: int = 0
    packet: tuple[int, int] = (1, 1)

    def __post_init__(self) -> None:
        cols, rows = self.packet
        if self.packet != (1, 1) and (min(cols, rows) < 1 or cols * rows not in PACKET_LANES):
            raise ValueError(f"a packet of {cols}x{rows} pixels is not an OpenCL vector width "
                             f"({', '.join(map(str, PACKET_LANES))} lanes)")

    def lane_width(self, device_simd_width: int) -> int:
        """Work-items of one SIMD group: the required sub-group size, else the device's."""
        return self.sub_group or device_simd_width

    def lanes(self, device_simd_width: int) -> tuple[int, int]:
        """Pixels (rows, columns) that run in lockstep: the packet, else one SIMD group of
        work-items (:func:`raytracer.mesh.phases.simd_lanes`)."""
        if self.packet != (1, 1):
            return self.packet[1], self.packet[0]
        return simd_lanes(self.lane_width(device_simd_width), self.group)

    def work_items(self, width: int, height: int) -> tuple[int, int]:
        """The global size for a ``width`` x ``height`` image: a work-item per packet, in
        whole work-groups."""
        (gx, gy), (px, py) = self.group, self.packet
        return math.ceil(width / (px * gx)) * gx, math.ceil(height / (py * gy)) * gy

    @property
    def label(self) -> str:
        shape = f"{self.group[0]}x{self.group[1]}"
        if self.sub_group:
            shape += f"/sg{self.sub_group}"
        if self.packet != (1, 1):
            shape += f"/p{self.packet[0]}x{self.packet[1]}"
        return shape


DEFAULT = Launch()


@dataclass(frozen=True)
class KernelLaunches:
    """The launch of every kernel of a program (kernels not named launch by default)."""

    by_kernel: Mapping[str, Launch]

    def __getitem__(self, kernel: str) -> Launch:
        return self.by_kernel.get(kernel, DEFAULT)

    @property
    def signature(self) -> str:
        """``kernel=label`` for each kernel not launched by default ("" when none is)."""
        return " ".join(f"{k}={v.label}" for k, v in sorted(self.by_kernel.items())
                        if v != DEFAULT)


DEFAULTS = KernelLaunches({})


def candidates(extensions: str, simd_width: int = 0,
               packets: tuple[tuple[int, int], ...] = ()) -> list[Launch]:
    """The default; with the sub-group extension also 16x4 and 32x2 groups as the driver likes
    and each sub-group size in the shape whose rows are one sub-group wide (8x8, 16x4, 32x2),
    the device's SIMD width first (the preferred one of sizes that time alike). Without it
    the default alone: the shape alone changed no kernel's time on PoCL (the tracer's phases
    at 1280x720, the caster at 512², within 2 %), and timing shapes in a process that also
    runs Intel's runtime read PoCL's first ones up to 1.9x slow. Last, on every device, the
    default group with each of ``packets`` (a kernel's packet forms)."""
    found = [DEFAULT]
    if SUB_GROUP_EXTENSION in extensions.split():
        sized = [Launch(shape, shape[0]) for shape in SHAPES if shape[0] in SUB_GROUP_SIZES]
        found = ([Launch(shape) for shape in SHAPES]
                 + sorted(sized, key=lambda launch: launch.sub_group != simd_width))
    return found + [Launch(packet=packet) for packet in packets]


def with_sub_groups(source: str, sizes: Mapping[str, int]) -> str:
    """``source`` with ``intel_reqd_sub_group_size(n)`` on each kernel named in ``sizes``
    (n > 0). A kernel defined twice is an error; one not defined is left to the build to
    report."""
    for kernel, size in sizes.items():
        if size <= 0:
            continue
        pattern = re.compile(rf"__kernel\s+void\s+{re.escape(kernel)}\s*\(")
        source, n = pattern.subn(
            f"__kernel __attribute__((intel_reqd_sub_group_size({size}))) void {kernel}(",
            source)
        if n > 1:
            raise ValueError(f"kernel {kernel!r} is defined {n} times in the source")
    return source


def choose(seconds: Mapping[Launch, float]) -> Launch:
    """The first launch (in ``seconds``' order, the default first) whose time is within
    1 / :data:`MARGIN` of the fastest: a launch replaces an earlier one only when clearly
    faster, so that timing noise does not flip the choice."""
    finite = [(k, v) for k, v in seconds.items() if math.isfinite(v)]
    if not finite:
        return DEFAULT
    best = min(v for _, v in finite)
    return next(k for k, v in finite if v * MARGIN <= best)


#: timing of candidates: {launch: {kernel: seconds}} (a candidate that cannot build: absent)
Measure = Callable[[list[Launch]], Mapping[Launch, Mapping[str, float]]]


def time_rounds(launches: list[Launch], kernels: tuple[str, ...],
                run: Callable[[Launch, str], float],
                applies: Callable[[Launch, str], bool] = lambda launch, kernel: True,
                ) -> dict[Launch, dict[str, float]]:
    """The best of :func:`repeated` ``run(launch, kernel)`` (seconds) for every pair that
    ``applies`` (a kernel without a packet form has no packet launch; the others are absent
    from the result): :data:`ROUNDS` rounds over all launches after a warm-up round (one run
    each), every other round in reverse, so that a slow stretch of the machine (another
    runtime's workers still spinning, say) does not fall on the same launches each time; a
    pair already :data:`PRUNE` times the best of its kernel is not run again."""
    times = {launch: {k: math.inf for k in kernels if applies(launch, k)} for launch in launches}
    for round_ in range(ROUNDS + 1):
        for launch in launches if round_ % 2 == 0 else launches[::-1]:
            for kernel in times[launch]:
                own = times[launch][kernel]
                if math.isfinite(own) and own > PRUNE * min(t.get(kernel, math.inf)
                                                             for t in times.values()):
                    continue
                if round_ == 0:
                    run(launch, kernel)
                else:
                    times[launch][kernel] = min(own, repeated(run, launch, kernel))
    return times


def repeated(run: Callable[[Launch, str], float], launch: Launch, kernel: str) -> float:
    """The fastest of ``run(launch, kernel)`` repeated until :data:`MIN_TIMED` seconds of it
    have run (at most :data:`MAX_REPEATS` times). A 2-ms kernel timed once per round spread by
    a third between rounds, enough to flip the choice between two shapes a calibration was
    fitted with; a longer kernel runs once."""
    best = total = run(launch, kernel)
    for _ in range(MAX_REPEATS - 1):
        if total >= MIN_TIMED:
            break
        seconds = run(launch, kernel)
        best, total = min(best, seconds), total + seconds
    return best


def choose_all(kernels: Iterable[str], times: Mapping[Launch, Mapping[str, float]]
               ) -> KernelLaunches:
    """Each kernel's :func:`choose` over the candidates timed for it."""
    return KernelLaunches({k: choose({launch: t[k] for launch, t in times.items() if k in t})
                           for k in kernels})


def _cache_path(device: cl.Device, source: str, workload: str = "") -> Path:
    digest = hashlib.sha256((source + workload).encode()).hexdigest()[:12]
    return cache_dir() / "launches" / f"{traits_key(device)}-{digest}.json"


def _load(path: Path, kernels: tuple[str, ...]) -> KernelLaunches | None:
    try:
        data = json.loads(path.read_text())
        if data.get("version") != CACHE_VERSION or sorted(data["launches"]) != sorted(kernels):
            return None
        return KernelLaunches({k: Launch(tuple(v["group"]), int(v["sub_group"]),
                                         tuple(v["packet"]))
                               for k, v in data["launches"].items()})
    except (OSError, ValueError, TypeError, KeyError):
        return None  # absent or unreadable: measure again and overwrite


def _document(launches: KernelLaunches, times: Mapping[Launch, Mapping[str, float]]) -> dict:
    """The cache file's content: the launches and the times that chose them."""
    return {"version": CACHE_VERSION,
            "launches": {k: {"group": list(v.group), "sub_group": v.sub_group,
                             "packet": list(v.packet)}
                         for k, v in launches.by_kernel.items()},
            "seconds": {launch.label: dict(t) for launch, t in times.items()}}


_memo: dict[Path, KernelLaunches] = {}


def device_launches(device: cl.Device, source: str, kernels: tuple[str, ...],
                    measure: Measure, simd_width: int = 0,
                    packets: tuple[tuple[int, int], ...] = (),
                    workload: str = "") -> KernelLaunches:
    """The cached launches of ``source``'s ``kernels`` on ``device`` (whose lanes are
    ``simd_width`` wide; ``packets``: the kernels' packet forms), measured with ``measure`` on
    first use where there is a choice. ``workload`` names what ``measure`` renders: another
    workload is another choice, cached apart."""
    options = candidates(device.extensions, simd_width, packets)
    if options == [DEFAULT]:
        return DEFAULTS
    path = _cache_path(device, source, workload)
    if path in _memo:
        return _memo[path]
    launches = _load(path, kernels)
    if launches is None:
        log.info("choosing how to launch each kernel on %s: timing %d launch shapes, a kernel "
                 "build and a few frames each (1-3 s apiece on 2 cores), once per device and "
                 "kernel source", device.name.strip(), len(options))
        times = measure(options)
        launches = choose_all(kernels, times)
        store_cache_file(path, _document(launches, times))
    _memo[path] = launches
    return launches
