"""One module instance of a pipeline run, as an MPI rank (rank k runs instance k of the spec):
``mpiexec -n N python -m mpi4py -m studies.pipeline_mapping.pipeline.worker SPEC.json OUT.json``.

The FlowVR module loop: *wait* until every FIFO input holds a message (greedy inputs take
their newest message, if any, without waiting), *compute* (busy work until the thread has
used T_exec·LD of CPU time, so it stretches when the core is shared, then T_exec·(1 − LD)
of sleep, the module's I/O; or one iteration of a real module's work, set up before the
run starts: :mod:`studies.pipeline_mapping.pipeline.work`), *put* one message of the connection's
volume on every output. Waiting polls MPI every half millisecond and sleeps in between, so
a waiting module leaves its core to the others. The process is pinned to its node's cores
(one core when the mapping pins it). Each rank runs until the spec's duration is over,
then tells its consumers how many messages it sent, reads what is still coming, and rank 0
writes what every rank measured.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from common.atomic_files import write_json
from raytracer.mpi.faults import install_excepthook
from studies.pipeline_mapping.pipeline.shaper import Link
from studies.pipeline_mapping.pipeline.work import Work, busy_step, real_step

POLL = 0.0005  # s between polls while waiting
FIN = 16384  # tag offset of the "sent N messages on edge k" notice
WINDOW = 0.5  # s: T_it is also reported per window, to see oscillations


class Rank:
    """One instance's inputs, outputs and measurements."""

    def __init__(self, comm: Any, spec: dict[str, Any]) -> None:
        self.comm = comm
        self.spec = spec
        self.me = spec["instances"][comm.Get_rank()]
        ranks = {inst["name"]: k for k, inst in enumerate(spec["instances"])}
        edges = spec["edges"]
        self.src = {k: ranks[e["src"]] for k, e in enumerate(edges)}
        self.dst = {k: ranks[e["dst"]] for k, e in enumerate(edges)}
        self.ins = [k for k, e in enumerate(edges) if e["dst"] == self.me["name"]]
        self.outs = [k for k, e in enumerate(edges) if e["src"] == self.me["name"]
                     and e["kind"] != "mpi"]
        self.kind = {k: e["kind"] for k, e in enumerate(edges)}
        self.links = {k: Link(edges[k]["bandwidth"], edges[k]["latency"], edges[k]["volume"])
                      for k in self.ins}
        self.payload = {k: np.zeros(max(16, int(edges[k]["volume"] * 1e6)), np.uint8)
                        for k in self.outs}
        self.pending: dict[int, list[float]] = {k: [] for k in self.ins}
        self.received = dict.fromkeys(self.ins, 0)
        self.consumed = dict.fromkeys(self.ins, 0)
        self.backlog_max = dict.fromkeys(self.ins, 0)
        self.sent = dict.fromkeys(self.outs, 0)
        self.requests: list[Any] = []

    def poll(self) -> None:
        """Receive every message that has arrived; note when the emulated link shows it."""
        status = MPI.Status()
        for k in self.ins:
            while self.comm.Iprobe(source=self.src[k], tag=k, status=status):
                buf = np.empty(status.Get_count(MPI.BYTE), np.uint8)
                self.comm.Recv([buf, MPI.BYTE], source=self.src[k], tag=k)
                sent_at = float(buf[:8].view(np.float64)[0])
                self.pending[k].append(self.links[k].visible_at(sent_at))
                self.received[k] += 1
            self.backlog_max[k] = max(self.backlog_max[k], len(self.pending[k]))

    def wait(self, deadline: float) -> bool:
        """Block until every FIFO input shows a message (False once past ``deadline``)."""
        fifo = [k for k in self.ins if self.kind[k] == "fifo"]
        while True:
            self.poll()
            now = time.monotonic()
            if now >= deadline:
                return False
            if all(self.pending[k] and self.pending[k][0] <= now for k in fifo):
                for k in fifo:
                    self.pending[k].pop(0)
                    self.consumed[k] += 1
                for k in self.ins:
                    if self.kind[k] == "greedy":
                        seen = [t for t in self.pending[k] if t <= now]
                        self.consumed[k] += len(seen)
                        self.pending[k] = self.pending[k][len(seen):]
                return True
            time.sleep(POLL)

    def put(self) -> None:
        """One message on every output, stamped with the time it leaves."""
        for k in self.outs:
            buf = self.payload[k]
            buf[:8].view(np.float64)[0] = time.monotonic()
            self.requests.append(self.comm.Isend([buf.copy(), MPI.BYTE], dest=self.dst[k],
                                                 tag=k))
            self.sent[k] += 1
        if len(self.requests) > 64:
            self.requests = [r for r in self.requests if not r.Test()]

    def finish(self) -> None:
        """Tell consumers how many messages were sent; read what is still on the way."""
        for k in self.outs:
            self.requests.append(self.comm.isend(self.sent[k], dest=self.dst[k], tag=FIN + k))
        expected: dict[int, int] = {}
        while len(expected) < len(self.ins) or any(
                self.received[k] < n for k, n in expected.items()):
            for k in self.ins:
                if k not in expected and self.comm.Iprobe(source=self.src[k], tag=FIN + k):
                    expected[k] = self.comm.recv(source=self.src[k], tag=FIN + k)
            self.poll()
            time.sleep(POLL)
        MPI.Request.Waitall(self.requests)


def run(comm: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Run this rank's module for the spec's duration; what it measured."""
    r = Rank(comm, spec)
    me = r.me
    cores = spec["cores"][me["node"]]
    os.sched_setaffinity(0, [cores[me["cpu"]]] if me["cpu"] is not None else cores)
    step = (real_step(Work(**me["work"])) if me["work"]
            else busy_step(me["t_exec"], me["load"]))
    start = comm.bcast(time.monotonic() + 0.3 if comm.Get_rank() == 0 else None)
    deadline = start + spec["seconds"]
    warm = start + min(1.0, 0.25 * spec["seconds"])
    time.sleep(max(0.0, start - time.monotonic()))
    primed = [k for k in spec["primed"] if k in r.outs]
    if primed:
        outs, r.outs = r.outs, primed
        r.put()
        r.outs = outs
    starts, computes, cpus = [], [], []
    while r.wait(deadline):
        t = time.monotonic()
        c = time.process_time()
        step()
        if t >= warm:
            starts.append(t)
            computes.append(time.monotonic() - t)
            cpus.append(time.process_time() - c)
        r.put()
    r.finish()
    gaps = np.diff(starts)
    windows = []
    if len(starts) > 1:
        edges = np.arange(starts[0], starts[-1], WINDOW)
        for a in edges:
            inside = gaps[(np.array(starts[:-1]) >= a) & (np.array(starts[:-1]) < a + WINDOW)]
            if inside.size:
                windows.append(float(inside.mean() * 1e3))
    return {"name": me["name"], "iterations": len(starts),
            "t_it_ms": float(gaps.mean() * 1e3) if gaps.size else None,
            "t_cexec_ms": float(np.mean(computes) * 1e3) if computes else None,
            "cpu_ms": float(np.mean(cpus) * 1e3) if cpus else None,
            "windows_ms": windows,
            "inputs": {str(k): {"consumed": r.consumed[k], "received": r.received[k],
                                "backlog_max": r.backlog_max[k],
                                "backlog_end": r.received[k] - r.consumed[k]}
                       for k in r.ins},
            "sent": {str(k): n for k, n in r.sent.items()}}


def main(argv: list[str]) -> None:
    """Entry point of every rank."""
    comm = MPI.COMM_WORLD
    install_excepthook(comm)
    with open(argv[0]) as f:
        spec = json.load(f)
    if comm.Get_size() != len(spec["instances"]):
        raise SystemExit(f"the spec has {len(spec['instances'])} instances, the job "
                         f"{comm.Get_size()} ranks")
    result = run(comm, spec)
    results = comm.gather(result, root=0)
    if comm.Get_rank() == 0:
        write_json(argv[1], {"modules": results})


if __name__ == "__main__":
    main(sys.argv[1:])
