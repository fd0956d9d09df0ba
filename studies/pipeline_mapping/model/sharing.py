"""CPU sharing as a fair scheduler does it (Linux CFS): an alternative to the paper's printed
allocation (``solve(..., policy="shared")``), not part of the paper.

The paper: Jubertie, Melin, "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".

The printed allocation gives the CPU to modules in a fixed priority order and counts each
one's full load on its CPU even while it waits for its inputs, so a module that computes for
1 ms out of every 40 can take a whole CPU from its neighbours. Here a module is *runnable*
for the fraction ρ = (T_cexec − T_exec·(1 − LD)) / T_it of its iteration; while runnable it
gets the expected fair share E[min(1, S / (1 + N))] of its S CPUs (its node's CPUs, or the
one it is pinned to), N being how many co-located modules are runnable at the same time
(each independently, with its ρ; modules of one synchronous cycle never are together). Its
busy time stretches by that share: T_cexec = T_exec·(1 − LD) + T_exec·LD / share. T_it
follows (Eqs. 3–5) and the whole is iterated to its fixed point.

Known limit: identical periodic modules on one CPU tend to run in phase (both busy, then
both asleep), which the independence assumption does not see.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Runner:
    """What the sharing model needs of one module."""

    name: str
    node: str
    node_cpus: int
    cpu: int | None
    busy: float  # T_exec·LD, ms of CPU per iteration
    sleep: float  # T_exec·(1 − LD), ms
    group: str  # modules of one synchronous cycle never run together


def expected_share(servers: int, others: Sequence[float]) -> float:
    """E[min(1, servers / (1 + N))] with N the number of ``others`` runnable, each
    independently with its probability."""
    dist = [1.0]  # P(N = n)
    for p in others:
        step = [0.0] * (len(dist) + 1)
        for n, q in enumerate(dist):
            step[n] += q * (1.0 - p)
            step[n + 1] += q * p
        dist = step
    return sum(q * min(1.0, servers / (1 + n)) for n, q in enumerate(dist))


def shares(runners: Sequence[Runner], runnable: dict[str, float]) -> dict[str, float]:
    """Each module's expected CPU share while runnable, given every module's ρ."""
    out = {}
    for j in runners:
        servers = j.node_cpus if j.cpu is None else 1
        others = []
        for k in runners:
            if k is j or k.node != j.node or k.group == j.group:
                continue
            if j.cpu is not None and k.cpu is not None and k.cpu != j.cpu:
                continue
            spread = k.node_cpus if (j.cpu is not None and k.cpu is None) else 1
            others.append(runnable[k.name] / spread)
        out[j.name] = expected_share(servers, others)
    return out
