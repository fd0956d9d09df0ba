"""Launch and monitor: runs a job under ``mpiexec`` and names the rank a failed job lost.

:func:`launch` runs ``mpiexec -n K python -m mpi4py -m <module> ...`` (the ``-m mpi4py``
runner aborts on unhandled exceptions too) and kills its own process group on timeout. A
killed rank (SIGKILL, a crash) is handled by the launcher: hydra tears the job down and
:func:`launch` names the rank (each rank runs under :mod:`~raytracer.mpi.rank_sentinel`,
which reports it); an aborting rank's message reaches it too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raytracer.mpi import rank_sentinel
from raytracer.mpi.faults import SAID, say
from raytracer.mpi.pinning import cpu_cores
from raytracer.mpi.shared_memory import remove_orphaned_segments

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


class _Monitor:
    """Collects the sentinels' reports (``RANK PID SIGNAL``, one connection each) on a Linux
    abstract socket (no file is written): a sentinel reports only when its own rank was
    killed by a signal while the job still stood, so the reports name the failed rank. A rank
    that aborts sends its message too (``SAID ...``)."""

    def __init__(self) -> None:
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
                say(note)
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
