"""What a benchmark records about the machine it ran on: CPU, OpenCL runtimes, and how much of
the CPUs *other* processes took while it ran.

A timed figure measured while other work shared the cores measures that work too. So every
benchmark JSON carries ``"run": {"cpu", "opencl", "host_speed", "others_share", ...}`` where
``others_share`` = (busy CPU time of the whole machine from ``/proc/stat`` − this process's and
its children's CPU time) / (wall time × cores). Above :data:`QUIET_LIMIT` the run decides no
goal: :func:`mark_goals` says so beside each goal's ``met``. ``host_speed``
(:func:`~benchmarks.harness.host_speed.measure_host_speed`, taken before the run's counters
start, and ``host_speed_at_end`` after they stop) tells apart two hosts that share a CPU label
but not a speed or a steadiness, and shows a host that changed during the run.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from benchmarks.harness.host_speed import measure_host_speed
from benchmarks.harness.results import CHECKOUT
from common.cpu_info import cpuinfo, this_machine

QUIET_LIMIT = 0.10
COMMIT_ENV = "AUTOTUNE_COMMIT"  # the commit a copy of the checkout without git history holds


#: Paths a run writes or a report regenerates: changes there do not change what ran
NOT_CODE = (":(exclude)results", ":(exclude)docs")


def checkout_commit() -> str:
    """The commit that ran: ``$AUTOTUNE_COMMIT`` (a GPU machine's copy of the checkout has
    no git history, so the call names it), else git's HEAD, ``-dirty`` where a tracked file
    outside ``results/`` and ``docs/`` has changes (a result saved by the run before, or an
    edited page, is not what ran)."""
    if os.environ.get(COMMIT_ENV):
        return os.environ[COMMIT_ENV]
    try:
        head = _git("describe", "--always", "--abbrev=12")
        changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", *NOT_CODE)
    except (OSError, subprocess.SubprocessError):
        return f"unknown (no git here and no ${COMMIT_ENV})"
    return head + ("-dirty" if changed else "")


def _git(*args: str) -> str:
    """A git command's output in the checkout."""
    return subprocess.run(["git", *args], cwd=CHECKOUT, capture_output=True, text=True,
                          timeout=10, check=True).stdout.strip()


def cpu_model() -> str:
    """The CPU's model name, family and model number (``/proc/cpuinfo``)."""
    fields = cpuinfo()
    if not fields:
        return platform.processor() or "unknown"
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}), {os.cpu_count()} CPUs")


def busy_and_total_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from ``/proc/stat``."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values) - idle) / tick, sum(values) / tick


def own_cpu_seconds() -> float:
    """CPU seconds of this process and the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def opencl_runtimes() -> list[str]:
    """One line per OpenCL device here (runtime, SIMD width, clock, builds or not)."""
    try:
        from raytracer.device.choice import DeviceError, list_devices  # lazy: loads pyopencl
    except ImportError as exc:  # no OpenCL at all: said, not raised
        return [f"none: {exc}"]
    try:
        return [info.describe() for info in list_devices()]
    except DeviceError as exc:
        return [f"none: {exc}"]


@dataclass
class RunRecord:
    """Counters at the start of a run; :meth:`figures` reads them again at its end."""

    host_speed: dict = field(default_factory=measure_host_speed)  # first: outside the counters
    wall0: float = field(default_factory=time.perf_counter)
    busy0: float = field(default_factory=lambda: busy_and_total_seconds()[0])
    own0: float = field(default_factory=own_cpu_seconds)
    load0: float = field(default_factory=lambda: os.getloadavg()[0])
    extra: dict = field(default_factory=dict)

    def others_share(self) -> float:
        """Share of all cores that other processes used since the start."""
        wall = time.perf_counter() - self.wall0
        busy = busy_and_total_seconds()[0] - self.busy0
        own = own_cpu_seconds() - self.own0
        return max(0.0, (busy - own) / max(wall * (os.cpu_count() or 1), 1e-9))

    def figures(self) -> dict:
        """The ``"run"`` block of a benchmark's JSON."""
        share = self.others_share()
        wall, load = round(time.perf_counter() - self.wall0, 2), os.getloadavg()[0]
        return {"cpu": cpu_model(), "machine": this_machine(), "commit": checkout_commit(),
                "python": platform.python_version(), "opencl": opencl_runtimes(),
                "host_speed": self.host_speed,
                "others_share": round(share, 4), "quiet": share <= QUIET_LIMIT,
                "host_speed_at_end": measure_host_speed(), "wall_s": wall,
                "load_average": {"start": self.load0, "end": load},
                **self.extra}


@contextmanager
def measured_run() -> Iterator[RunRecord]:
    """``with measured_run() as run: ...`` then ``run.figures()`` for the JSON's ``"run"``."""
    yield RunRecord()


def stamp(figures: dict, run: RunRecord, changed: Mapping[str, str] | None = None) -> dict:
    """``figures`` with the ``"run"`` block of ``run`` and its goals marked (:func:`mark_goals`;
    ``changed``: how the run differs from the one its goals are set for)."""
    figures["run"] = run.figures()
    if isinstance(figures.get("goals"), dict):
        mark_goals(figures["goals"], figures["run"], changed)
    return figures


def at_most(value: float | None, limit: float, what: str) -> dict:
    """A goals-block entry for ``value <= limit``: value, goal text, met, what was measured
    (``met`` None where nothing was measured: a step skipped or failed)."""
    met = None if value is None else bool(value <= limit)
    return {"value": value, "goal": f"<= {limit}", "met": met, "what": what}


OVER_ORACLE = 1.2  # a tracking goal's allowance over the oracle's error, where that is larger


def error_goal(value: float, absolute: float, oracle: float | None, what: str) -> dict:
    """A tracking error against ``absolute``, or against :data:`OVER_ORACLE` x the oracle's on
    the same path where the oracle itself is above ``absolute`` (the floor this machine
    allows: a controller that knew every setting's cost on every view)."""
    if oracle is None:
        return at_most(value, absolute, f"{what} (no oracle measured: judged absolutely)")
    if oracle <= absolute:
        return at_most(value, absolute, f"{what} (the oracle's {oracle:.1%} is within it)")
    return at_most(value, round(OVER_ORACLE * oracle, 4),
                   f"{what}: {OVER_ORACLE}x the oracle's {oracle:.1%} on the same path, "
                   f"which is above {absolute:.0%}")


def quick_run(quick: bool) -> dict[str, str]:
    """How a ``--quick`` run differs from the run its benchmark's goals are set for, in the
    shape of :func:`changed_options`."""
    return {"quick": "--quick"} if quick else {}


def changed_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                    names: Sequence[str]) -> dict[str, str]:
    """The options of ``names`` that ``args`` holds away from ``parser``'s defaults, in order:
    ``{part of the saved file's name: the option as given}``. A run with any is not its goals'
    protocol: it saves under a name of its own (``_``-joined parts) and decides no goal."""
    out = {}
    for name in names:
        value = getattr(args, name)
        if value == parser.get_default(name):
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            out[name] = flag
            continue
        text = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        out[f"{name}-" + re.sub(r"[^A-Za-z0-9.+-]", "-", text.replace(",", "+"))] = \
            f"{flag} {text}"
    return out


def variant_name(stem: str, changed: Mapping[str, str], runtime: str = "") -> str:
    """A saved result's file name: ``stem``, the parts of what the run changed from its
    protocol (:func:`changed_options`, :func:`quick_run`), the runtime where the benchmark
    names one; a variant never takes the protocol's."""
    return "_".join([stem, *changed, *([runtime] if runtime else [])]) + ".json"


def mark_goals(goals: dict, run: dict, changed: Mapping[str, str] | None = None) -> dict:
    """Each goal with ``"decides"``: False (and why) when the run was not quiet, or was not the
    run its goals are set for (``changed``: the options it set away from the protocol's, as
    :func:`changed_options` gives them), or the goal itself was not judged (``"met"`` None:
    nothing measured, or too few runs to judge)."""
    why = []
    if not run["quiet"]:
        why.append(f"other processes used {run['others_share']:.0%} of the CPUs during the "
                   f"run (limit {QUIET_LIMIT:.0%})")
    if changed:
        why.append("not the goals' protocol: " + ", ".join(changed.values()))
    for goal in goals.values():
        reasons = why if goal.get("met") is not None else [
            *why, goal.get("not_judged", "the goal was not judged: nothing measured")]
        goal["decides"] = not reasons
        if reasons:
            goal["why_not"] = "; ".join(reasons)
    return goals


def unmet_goal_lines(goals: dict | None, line_of: Callable[[str, dict], str | None]
                     ) -> dict[str, str]:
    """``line_of(name, goal)`` for each goal not met, keyed by name: a benchmark's
    ``goal_limits``. A goal it has no line for (None, or a figure that a result saved under an
    older protocol lacks: KeyError) is left out."""
    out = {}
    for name, goal in (goals or {}).items():
        if goal.get("met") is False:
            try:
                line = line_of(name, goal)
            except KeyError:
                line = None
            if line:
                out[name] = line
    return out


def mark_limits(goals: dict, limits: dict[str, str]) -> dict:
    """Each goal not met with ``"limited_by"``: the line its benchmark's ``goal_limits`` gives
    from the run's own figures (what limits it, printed beside the goal)."""
    for name, line in limits.items():
        goals[name]["limited_by"] = line
    return goals
