"""An MPI runtime that never hangs: abort on any rank's exception, watchdogs, agreed errors.

A plain mpi4py launch hangs forever when one rank raises while the others wait in a
collective (measured with mpich's wheel: the job never returns). This module closes
every way to get there:

- :func:`install_excepthook`: an uncaught exception on any rank (main thread or any other
  thread) prints ``rank R failed: <error>`` with its traceback and calls
  ``COMM_WORLD.Abort``, which takes the whole job down at once;
- :class:`Watchdog` / :func:`watchdog`: a daemon thread that aborts the job, naming the
  phase, when a blocking phase (render, compositing, gather) runs past its timeout;
- :func:`agree`: a decision taken before a collective (bad input found on some rank) is
  made the same on every rank, which then all raise the same error;
- :func:`launch`: runs ``mpiexec -n K python -m mpi4py -m <module> ...`` (the ``-m mpi4py``
  runner aborts on unhandled exceptions too) and kills its own process group on timeout;
- :func:`share_node`: ranks on one machine split its cores (each pinned to its own, or round
  robin where they outnumber the cores; each OpenCL CPU device on its share:
  ``AUTOTUNE_COMPUTE_UNITS``), or per-rank timings mean nothing.

A killed rank (SIGKILL, a crash) is handled by the launcher: hydra tears the job down and
:func:`launch` names the rank (each rank runs under :mod:`rank_sentinel`, which reports it);
an aborting rank sends its message to the launcher as well as to stderr.
Everything works without mpiexec as a one-process world.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from raytracer.opencl_runtimes import COMPUTE_UNITS_ENV, limit_cpu_threads
from raytracer.volume import rank_sentinel

ABORT_EXCEPTION = 1  # exit code of a job aborted by an uncaught exception
ABORT_WATCHDOG = 3  # exit code of a job aborted by a watchdog


def world() -> Any:
    """``MPI.COMM_WORLD`` (a one-rank world when not started by mpiexec)."""
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _comm(comm: Any) -> Any:
    return world() if comm is None else comm


def _say(text: str) -> None:
    """Write one line to stderr unbuffered (the process may die right after)."""
    with contextlib.suppress(Exception):
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()


def abort(comm: Any = None, code: int = ABORT_EXCEPTION, message: str = "") -> None:
    """Print ``message`` and end every rank of the job now (``Abort``; plain exit if one rank).

    The message also goes to :func:`launch`'s monitor where there is one: hydra tears the
    job down on ``Abort``, and on a loaded machine its proxies were seen to lose the ranks'
    last stderr lines (2 of 12 aborts beside two busy loops), so ``launch`` adds them back."""
    comm = _comm(comm)
    if message:
        _say(message)
        rank_sentinel.tell_launcher(SAID + message.encode(errors="replace"))
    if comm.Get_size() > 1:
        comm.Abort(code)
    os._exit(code)


# ------------------------------------------------------------------------ excepthook

_hook_comm: Any = None


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    comm = _comm(_hook_comm)
    rank = comm.Get_rank()
    if comm.Get_size() == 1:  # nobody to wait for: the ordinary report and exit
        sys.__excepthook__(kind, value, tb)
        return
    _say("".join(traceback.format_exception(kind, value, tb)).rstrip("\n"))
    code = value.code if isinstance(value, SystemExit) and isinstance(value.code, int) else 1
    # the naming line as abort's message: the launcher's monitor gets it too, where hydra's
    # teardown loses the rank's stderr (seen once in a CI run: the job's stderr empty)
    abort(comm, code or ABORT_EXCEPTION, f"rank {rank} failed: {kind.__name__}: {value}")


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    _excepthook(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)


def install_excepthook(comm: Any = None) -> None:
    """Any uncaught exception on this rank, in any thread, aborts the whole job with
    ``rank R failed: <error>`` on stderr. Idempotent; call it on every rank at start-up."""
    global _hook_comm
    _hook_comm = comm
    sys.excepthook = _excepthook
    threading.excepthook = _thread_excepthook


# -------------------------------------------------------------------------- watchdog


class Watchdog:
    """One daemon thread that aborts the job when a guarded phase runs past its deadline.

    ``with dog.phase("compositing", 5.0): ...`` arms it; leaving the block disarms it.
    Phases may nest (each has its own deadline). The thread is daemonic, so it never keeps
    a finished process alive. It is woken only by a phase due before the deadline it sleeps
    until: a frame's three phases, each waking it on entry and exit, took 0.10-0.17 ms of a
    2.8 ms frame (bonsai 256², 2 ranks), the thread's wake-ups contending for the rank's core.
    A phase that ends leaves the thread asleep; it finds the phase gone when it wakes. (The
    wake-ups were also scheduling points: without them, two ranks pinned to one core run their
    kernels largely one after the other instead of taking turns finely.)
    """

    def __init__(self, comm: Any = None) -> None:
        self._comm = comm
        self._cond = threading.Condition()
        self._active: dict[int, tuple[str, float, float]] = {}  # id -> (phase, timeout, deadline)
        self._next = 0
        self._thread: threading.Thread | None = None
        self._sleeps_until = math.inf  # the deadline the thread waits for (inf: none)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="mpi-watchdog", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._active:
                    self._sleeps_until = math.inf
                    self._cond.wait()
                    continue
                name, timeout, deadline = min(self._active.values(), key=lambda p: p[2])
                left = deadline - time.monotonic()
                if left > 0:
                    self._sleeps_until = deadline
                    self._cond.wait(left)
                    continue
                comm = _comm(self._comm)
                abort(
                    comm,
                    ABORT_WATCHDOG,
                    f"rank {comm.Get_rank()}: phase '{name}' exceeded its {timeout:g} s "
                    f"timeout (watchdog: a rank is stuck, late or gone); aborting the job",
                )

    @contextlib.contextmanager
    def phase(self, name: str, timeout: float | None) -> Iterator[None]:
        """Guard the block: abort the job if it has not finished ``timeout`` seconds from now.

        ``timeout`` None or <= 0 means no watchdog for this block.
        """
        if timeout is None or timeout <= 0:
            yield
            return
        with self._cond:
            self._start()
            key = self._next
            self._next += 1
            deadline = time.monotonic() + timeout
            self._active[key] = (name, float(timeout), deadline)
            if deadline < self._sleeps_until:
                self._cond.notify()
        try:
            yield
        finally:
            with self._cond:
                self._active.pop(key, None)


_DOG: Watchdog | None = None


def watchdog(
    phase: str, timeout: float | None, comm: Any = None
) -> contextlib.AbstractContextManager[None]:
    """``with watchdog("gather", 10): ...`` on the process-wide :class:`Watchdog`."""
    global _DOG
    if _DOG is None:
        _DOG = Watchdog(comm)
    return _DOG.phase(phase, timeout)


# ---------------------------------------------------------------------------- agree


class AgreedError(ValueError):
    """Raised identically on every rank when any rank found a problem (see :func:`agree`)."""


def agree(ok: bool, message: str, comm: Any = None, error: type[Exception] = AgreedError) -> None:
    """Collective: raise the same ``error`` on every rank if ``ok`` is false on any rank.

    The message is the one of the lowest failing rank (sent as bytes, not pickled), with
    ``(rank R)`` appended in a multi-rank job. Call it where a decision precedes a
    collective, so no rank is left waiting for ranks that gave up.
    """
    from mpi4py import MPI

    comm = _comm(comm)
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1:
        if not ok:
            raise error(message)
        return
    mine = np.array([size if ok else rank], np.int64)
    first = np.empty_like(mine)
    comm.Allreduce(mine, first, op=MPI.MIN)
    root = int(first[0])
    if root == size:
        return
    data = np.frombuffer(message.encode(), np.uint8) if rank == root else None
    length = np.array([0 if data is None else data.size], np.int64)
    comm.Bcast(length, root=root)
    buf = data.copy() if data is not None else np.empty(int(length[0]), np.uint8)
    comm.Bcast(buf, root=root)
    raise error(f"{buf.tobytes().decode(errors='replace')} (rank {root})")


def guarded(fn: Any, message: str, comm: Any = None, error: type[Exception] = AgreedError) -> Any:
    """Run ``fn()`` on every rank; if it raises on any rank, every rank raises the same error.

    Returns ``fn()``'s result. The error text is ``message: <exception>`` of the lowest
    failing rank.
    """
    try:
        result, problem = fn(), ""
    except Exception as exc:  # noqa: BLE001 - turned into one agreed error
        result, problem = None, f"{message}: {exc}"
    agree(not problem, problem, comm, error)
    return result


# --------------------------------------------------------------------- cores per rank


def affinity() -> set[int]:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def cpu_cores() -> int:
    """How many cores this process may run on."""
    return len(affinity())


@dataclass(frozen=True)
class NodeShare:
    """How the ranks on one machine share its cores (what :func:`share_node` found and did)."""

    cores: int  # the machine's cores open to its ranks (the union of their affinity masks)
    ranks: int  # ranks of the communicator on this machine
    threads: int  # this rank's share: its OpenCL CPU device's threads
    pinned: tuple[int, ...] = ()  # the cores this rank was pinned to; () where left as launched

    @property
    def oversubscribed(self) -> bool:
        """More ranks than cores on this machine: they take turns on the cores."""
        return self.ranks > self.cores


def share_node(comm: Any = None, cores: int | None = None, environ: Any = None,
               apply: bool = True) -> NodeShare:
    """Collective: split this machine's cores between the ranks of ``comm`` on it.

    Each rank's OpenCL CPU device gets ``max(1, cores // ranks)`` threads
    (``AUTOTUNE_COMPUTE_UNITS`` and each CPU runtime's own limit,
    :func:`raytracer.opencl_runtimes.limit_cpu_threads`). Where the launcher left every rank
    free to run on all the cores (hydra's default), each rank is also pinned, as ``mpiexec
    -bind-to core`` does: to its own slice of the cores where there are no more ranks than
    cores, else rank r to core r mod cores. Unpinned, the OS runs ranks and their runtimes'
    threads on each other's cores (2 ranks on 2 cores, bonsai at 256²: 11 % of the per-rank
    render times ran over 15 % past their CPU time; pinned here, 1.4 %; pinned by ``mpiexec
    -bind-to core``, 0.7 %); oversubscribed it is worse (4 ranks on 2 cores, bonsai at 256²:
    one view at fixed knobs strayed 26 % from its median, pinned round robin 4.5-7 %, and
    frames took 2.4x less). Call it before
    the first OpenCL platform query (threads started later inherit the pinning; the runtimes
    read their limits once); importing pyopencl is fine. ``cores`` names the machine's core
    count instead (nothing is pinned then); ``apply=False`` only reports the share, changing
    nothing.
    """
    from mpi4py import MPI

    comm = _comm(comm)
    environ = os.environ if environ is None else environ
    mine = sorted(affinity())
    node_rank, masks = 0, [mine]
    if comm.Get_size() > 1:
        node = comm.Split_type(MPI.COMM_TYPE_SHARED)
        try:
            node_rank, masks = node.Get_rank(), node.allgather(mine)
        finally:
            node.Free()
    ranks = len(masks)
    pinned: tuple[int, ...] = ()
    if cores is None:
        union = sorted(set().union(*masks))
        cores = len(union)
        if apply and ranks > 1 and all(m == union for m in masks):
            if ranks <= cores:
                per = cores // ranks
                pinned = tuple(union[node_rank * per : (node_rank + 1) * per])
            else:
                pinned = (union[node_rank % cores],)
            with contextlib.suppress(AttributeError, OSError):
                os.sched_setaffinity(0, pinned)
    threads = max(1, cores // ranks)
    if apply:
        environ[COMPUTE_UNITS_ENV] = str(threads)
        limit_cpu_threads(environ)
    return NodeShare(cores, ranks, threads, pinned)


# --------------------------------------------------------------------------- launch


# MPICH busy-polls while waiting; with more ranks than cores the waiting ranks starve the
# working ones. These make a waiting rank yield at once (as mpi4py's own CI does for MPICH).
OVERSUBSCRIBED_ENV = {
    "MPIR_CVAR_POLLS_BEFORE_YIELD": "1",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "true",
    "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "1",
}


def mpiexec_path() -> str | None:
    """The ``mpiexec`` beside this Python (the mpich wheel installs one), else on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("mpiexec")


SENTINEL = Path(__file__).with_name("rank_sentinel.py")


def launch_command(argv: Sequence[str], ranks: int, *, sentinel: bool = False) -> list[str]:
    """The ``mpiexec`` command line that runs ``argv`` (a module or a ``.py`` file, then its
    arguments) on ``ranks`` ranks through mpi4py's runner; with ``sentinel``, each rank runs
    under :mod:`rank_sentinel`, which tells :func:`launch` which rank a signal killed."""
    if not argv:
        raise ValueError("launch needs a module name (or a .py script) to run")
    if ranks < 1:
        raise ValueError(f"rank count must be >= 1, got {ranks}")
    exe = mpiexec_path()
    if exe is None:
        raise FileNotFoundError("mpiexec not found: install the 'mpich' wheel (pip install mpich)")
    target = [argv[0]] if argv[0].endswith(".py") else ["-m", argv[0]]
    watch = [str(SENTINEL)] if sentinel else []
    return [exe, "-n", str(ranks), sys.executable, *watch, "-m", "mpi4py", *target, *argv[1:]]


SAID = b"SAID "  # what opens a rank's last words to the monitor (see abort)


class _Monitor:
    """Collects the sentinels' reports (``RANK PID SIGNAL``, one connection each) on a Linux
    abstract socket (no file is written): a sentinel reports only when its own rank was
    killed by a signal while the job still stood, so the reports name the failed rank. A rank
    that aborts sends its message too (``SAID ...``)."""

    def __init__(self) -> None:
        import socket

        self.name = f"autotune-mpi-{os.getpid()}-{time.monotonic_ns()}"
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind("\0" + self.name)
        self.server.listen(64)
        self.server.settimeout(0.2)
        self.killed: list[tuple[int, int, int]] = []  # (rank, pid, signal) in arrival order
        self.said: list[str] = []  # aborting ranks' messages, in arrival order
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mpi-monitor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            stopping = self._stop.is_set()  # once stopping, read what is queued, then end
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                if stopping:
                    break
                continue
            except OSError:
                return
            self._read(conn)
        self.server.close()

    def _read(self, conn: Any) -> None:
        with conn:
            conn.settimeout(1.0)
            data = b""
            with contextlib.suppress(OSError):
                while chunk := conn.recv(4096):
                    data += chunk
        if data.startswith(SAID):
            self.said.append(data[len(SAID):].decode(errors="replace"))
            return
        with contextlib.suppress(ValueError):
            rank, pid, signum = (int(x) for x in data.split())
            self.killed.append((rank, pid, signum))

    def close(self) -> None:
        """Read what the sentinels sent, then stop the monitor thread and wait for it."""
        self._stop.set()
        self._thread.join(timeout=2.0)


SHM_DIR = Path("/dev/shm")  # where MPICH keeps its shared-memory segments (Linux)


def remove_orphaned_segments(since: float, shm_dir: Path = SHM_DIR) -> list[str]:
    """Remove MPICH's shared-memory segments (``mpich_shm_*``) made at or after ``since``
    (epoch seconds) that no live process maps: what a job whose ranks were killed or aborted
    leaves behind (4 MiB each, never freed otherwise). Returns the names removed."""
    if not shm_dir.is_dir():
        return []
    found = {}
    for path in shm_dir.glob("mpich_shm_*"):
        with contextlib.suppress(OSError):
            if path.stat().st_mtime >= since:
                found[path.name] = path
    for maps in Path("/proc").glob("[0-9]*/maps"):
        if not found:
            break
        try:
            text = maps.read_text()
        except OSError:
            continue
        for name in [n for n in found if n in text]:
            del found[name]
    for path in found.values():
        with contextlib.suppress(OSError):
            path.unlink()
    return sorted(found)


def launch(
    argv: Sequence[str],
    ranks: int,
    *,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    capture: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (module, args...) on ``ranks`` MPI ranks and wait for it.

    Returns the completed process (stdout/stderr as text when ``capture``). On ``timeout``
    the launcher's whole process group is killed and ``subprocess.TimeoutExpired`` raised,
    so a hung job never outlives its caller. A rank that dies without a Python error
    (``kill -9``, a crash) is named on stderr (``rank R failed: ...``; Linux, where each rank
    runs under :mod:`rank_sentinel`), and the shared-memory segments the failed job left
    are removed (:func:`remove_orphaned_segments`). With more ranks than cores, MPICH is told
    to yield while waiting (:data:`OVERSUBSCRIBED_ENV`, unless ``env`` or the environment
    sets them).
    """
    started = time.time() - 1.0  # file times are coarser than the clock
    full_env = {**os.environ, **(env or {})}
    if ranks > cpu_cores():
        for key, value in OVERSUBSCRIBED_ENV.items():
            full_env.setdefault(key, value)
    monitor = None
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):
            monitor = _Monitor()
            full_env[rank_sentinel.ENV] = monitor.name
    cmd = launch_command(argv, ranks, sentinel=monitor is not None)
    pipe = subprocess.PIPE if capture else None
    try:
        with subprocess.Popen(
            cmd,
            stdout=pipe,
            stderr=pipe,
            text=True,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        ) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                remove_orphaned_segments(started)
                raise subprocess.TimeoutExpired(cmd, timeout or 0.0, out, err) from None
    finally:
        if monitor is not None:
            monitor.close()
    if proc.returncode:
        remove_orphaned_segments(started)
    if proc.returncode and monitor is not None:
        note = _name_failed(f"{out}\n{err}", monitor.killed, monitor.said)
        if note:
            if err is not None:
                err += note
            else:
                _say(note)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _name_failed(output: str, killed: list[tuple[int, int, int]], said: Sequence[str] = ()
                 ) -> str:
    """What names the failure where the output does not (a rank's Python error, a watchdog's
    abort): the aborting ranks' own messages as they sent them, else a ``rank R failed``
    line for each rank a signal killed (its sentinel's report)."""
    if re.search(r"^rank \d+(:| failed)", output, re.MULTILINE):
        return ""
    if said:
        return "".join(m if m.endswith("\n") else m + "\n" for m in said)
    lines = []
    for rank, pid, signum in killed:
        signum_text = f"signal {signum}"
        with contextlib.suppress(ValueError):
            signum_text = f"{signal.Signals(signum).name} ({signum_text})"
        lines.append(
            f"rank {rank} failed: its process (pid {pid}) was killed by {signum_text} without "
            "a Python error; the job was torn down\n"
        )
    return "".join(lines)
