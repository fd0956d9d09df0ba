"""Abort hooks and agreed errors: one rank's failure ends or stops every rank of the job.

- :func:`install_excepthook`: an uncaught exception on any rank (main thread or any other
  thread) prints ``rank R failed: <error>`` with its traceback and calls
  ``COMM_WORLD.Abort``, which takes the whole job down at once;
- :func:`agree`: a decision taken before a collective (bad input found on some rank) is
  made the same on every rank, which then all raise the same error.

An aborting rank sends its message to the launcher (:mod:`raytracer.mpi.launch`) as well as
to stderr. Everything works without mpiexec as a one-process world.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import traceback
from types import TracebackType
from typing import Any

import numpy as np

from raytracer.mpi import rank_sentinel

ABORT_EXCEPTION = 1  # exit code of a job aborted by an uncaught exception
ABORT_WATCHDOG = 3  # exit code of a job aborted by a watchdog
SAID = b"SAID "  # what opens a rank's last words to the launcher's monitor (see abort)


def world() -> Any:
    """``MPI.COMM_WORLD`` (a one-rank world when not started by mpiexec)."""
    from mpi4py import MPI  # lazy: importing it initialises MPI

    return MPI.COMM_WORLD


def comm_or_world(comm: Any) -> Any:
    """``comm``, or :func:`world` where it is None."""
    return world() if comm is None else comm


def say(text: str) -> None:
    """Write one line to stderr unbuffered (the process may die right after)."""
    with contextlib.suppress(Exception):
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()


def abort(comm: Any = None, code: int = ABORT_EXCEPTION, message: str = "") -> None:
    """Print ``message`` and end every rank of the job now (``Abort``; plain exit if one rank).

    The message also goes to :func:`~raytracer.mpi.launch.launch`'s monitor where there is
    one: hydra tears the job down on ``Abort``, and on a loaded machine its proxies were seen
    to lose the ranks' last stderr lines (2 of 12 aborts beside two busy loops), so ``launch``
    adds them back."""
    comm = comm_or_world(comm)
    if message:
        say(message)
        rank_sentinel.tell_launcher(SAID + message.encode(errors="replace"))
    if comm.Get_size() > 1:
        comm.Abort(code)
    os._exit(code)


# ------------------------------------------------------------------------ excepthook

_hook_comm: Any = None


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    comm = comm_or_world(_hook_comm)
    rank = comm.Get_rank()
    if comm.Get_size() == 1:  # nobody to wait for: the ordinary report and exit
        sys.__excepthook__(kind, value, tb)
        return
    say("".join(traceback.format_exception(kind, value, tb)).rstrip("\n"))
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


# ---------------------------------------------------------------------------- agree


class AgreedError(ValueError):
    """Raised identically on every rank when any rank found a problem (see :func:`agree`)."""


def agree(ok: bool, message: str, comm: Any = None, error: type[Exception] = AgreedError) -> None:
    """Collective: raise the same ``error`` on every rank if ``ok`` is false on any rank.

    The message is the one of the lowest failing rank (sent as bytes, not pickled), with
    ``(rank R)`` appended in a multi-rank job. Call it where a decision precedes a
    collective, so no rank is left waiting for ranks that gave up.
    """
    from mpi4py import MPI  # lazy: importing it initialises MPI

    comm = comm_or_world(comm)
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
