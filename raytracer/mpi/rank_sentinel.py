"""The parent of one MPI rank's process: tells the launcher which rank a signal killed.

:func:`raytracer.mpi.launch.launch` starts every rank as ``python rank_sentinel.py -m mpi4py
MODULE ...``. The sentinel forks, the child execs the rank (inheriting hydra's PMI environment
and descriptors, and dying with its sentinel through ``PR_SET_PDEATHSIG``), and the sentinel
waits. When the rank is killed by a signal, the sentinel sends ``RANK PID SIGNAL`` to the
launcher's socket before ending the same way. Hydra then kills the other sentinels, which
therefore cannot report their own ranks' deaths: the report names the rank that died first by
construction, not by timing. Run as a script (not ``-m``) so it imports nothing of the
package.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import sys

ENV = "AUTOTUNE_MPI_MONITOR"  # the launcher's abstract socket name (launch reads it)
PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def tell_launcher(data: bytes) -> None:
    """Send ``data`` on one connection to the socket of the launcher that started this job
    (named by :data:`ENV`), if any; where no launcher listens, nothing is sent (hydra's own
    output is all there is)."""
    name = os.environ.get(ENV)
    if not name:
        return
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect("\0" + name)
            sock.sendall(data)
    except OSError:
        pass


def _report(pid: int, signum: int) -> None:
    tell_launcher(f"{os.environ.get('PMI_RANK', '-1')} {pid} {signum}".encode())


def main(argv: list[str]) -> None:
    """Run ``python ARGV...`` as this process's child and end the way it ended."""
    sentinel = os.getpid()
    pid = os.fork()
    if pid == 0:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != sentinel:  # the sentinel died before prctl took effect
            os._exit(1)
        os.execv(sys.executable, [sys.executable, *argv])
    for signum in FORWARDED:
        signal.signal(signum, lambda received, _frame: os.kill(pid, received))
    _, status = os.waitpid(pid, 0)  # retried after a forwarded signal (PEP 475)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        _report(pid, signum)
        if signum in FORWARDED:
            signal.signal(signum, signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the rank's core, not ours
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # a signal whose default is not to end the process
    os._exit(os.waitstatus_to_exitcode(status))


if __name__ == "__main__":
    main(sys.argv[1:])
