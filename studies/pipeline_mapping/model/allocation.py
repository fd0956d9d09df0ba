"""CPU allocation on one node (Jubertie & Melin §IV-B, the printed algorithm).

The paper: Jubertie, Melin, "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".

Modules are taken in priority order (descending T_I/O). Each goes to the least-loaded CPU
(the first among ties), or to its own CPU when pinned, and gets LD_c = (1 − CPULD)·LD of it;
then T_cexec = T_exec·LD/LD_c.

Two readings where the printed loop is silent:

- When every CPU is fully loaded the printed loop leaves ``p`` undefined; here the module
  goes to the first least-loaded CPU, gets LD_c = 0 and is *starved* (T_cexec = ∞).
- Co-located modules of one synchronous cycle never run at the same time (each waits for
  the previous one; the paper's §V-A, Table IV), so they do not load each other's CPU: the load a
  module sees on a CPU leaves out its own cycle, and a cycle counts on a CPU by its largest
  LD_c there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """What the allocation needs of one module: its load, pinned CPU and cycle group."""

    name: str
    t_exec: float
    load: float
    cpu: int | None
    group: str  # modules sharing a group never run concurrently (one synchronous cycle)


@dataclass(frozen=True)
class Share:
    """The allocation's answer for one module (``cpu`` None: any CPU of its node)."""

    cpu: int | None
    ld_c: float
    t_cexec: float


def allocate(tasks: Sequence[Task], cpus: int) -> dict[str, Share]:
    """Allocate ``tasks`` (already in priority order) to ``cpus`` CPUs."""
    placed: list[dict[str, float]] = [{} for _ in range(cpus)]  # per CPU: group -> load
    out = {}
    for t in tasks:
        seen = [sum(v for g, v in cpu.items() if g != t.group) for cpu in placed]
        p = t.cpu if t.cpu is not None else min(range(cpus), key=seen.__getitem__)
        ld_c = max(0.0, 1.0 - seen[p]) * t.load
        placed[p][t.group] = max(placed[p].get(t.group, 0.0), ld_c)
        t_cexec = t.t_exec * t.load / ld_c if ld_c > 1e-12 else math.inf
        out[t.name] = Share(p, ld_c, t_cexec)
    return out
