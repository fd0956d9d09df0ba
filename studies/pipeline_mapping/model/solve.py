"""Iteration times of every module of a mapping (Jubertie & Melin §IV-B, Eqs. 1–8).

The paper: Jubertie, Melin, "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".

One pass: iteration times from the current T_cexec (Eq. 3 for predecessors, Eq. 4 along FIFO
edges, Eq. 5 around synchronous cycles), then on every node the modules sorted by descending
T_I/O (Eq. 6 for predecessors, Eq. 7 otherwise), then the CPU allocation, which gives new
T_cexec. The first pass starts from T_cexec = T_exec. Passes repeat until the order on every
node stays the same. Without interdependencies (no mixed cycle) this is the paper's
"predecessor parts first, then merge outwards" and ends after as many passes as the graph is
deep; with a mixed cycle it is the paper's iteration. An order that comes back after changing
is an oscillation: the modules whose rank changes are reported, with their range of T_it.

On a node whose modules all belong to one synchronous component and none is a predecessor
(the paper's first mixed configuration) the order is Eq. 8's: ascending T_exec·LD.

Modules that cannot be ordered (our reading of the paper's first bad FluidParticle mapping,
"both have a load of 97 %, we can not order these two modules"): in a mixed cycle, two
co-located modules that Eq. 8 cannot compare (different components, or a predecessor) wait
for the same share of their iteration, and swapping them changes the allocation. The Linux
scheduler ranks tasks by that share, so the prediction would be a coin toss:
:class:`UnorderableCycle` names them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from studies.pipeline_mapping.model.allocation import Share, Task, allocate
from studies.pipeline_mapping.model.description import Edge, Instance, Mapping, MappingError
from studies.pipeline_mapping.model.graph import SyncStructure, mixed_cycles, sync_structure
from studies.pipeline_mapping.model.sharing import Runner
from studies.pipeline_mapping.model.sharing import shares as shares_of

POLICIES = ("seed", "shared")
MAX_PASSES = 200
MAX_SHARED_STEPS = 2000
SHARE_TIE = 0.01  # I/O shares closer than this are a tie for the scheduler


class UnorderableCycle(MappingError):
    """A mixed cycle whose modules the model cannot order; names the modules involved."""


@dataclass(frozen=True)
class ModulePrediction:
    """One instance's prediction. ``cpu_load`` is its average use of its CPU, T_exec·LD/T_it
    (the LD_c column of the paper's Table VI); ``ld_c`` is the allocation's share while it runs."""

    name: str
    module: str
    node: str
    cpu: int | None  # None: any CPU of its node (the "shared" policy, unpinned)
    t_exec: float
    load: float
    t_io: float
    t_cexec: float
    ld_c: float
    t_it: float
    t_it_range: tuple[float, float]

    @property
    def frequency(self) -> float:
        """Iterations per second (Eq. 1)."""
        return 1e3 / self.t_it if self.t_it > 0 else math.inf

    @property
    def cpu_load(self) -> float:
        """Average fraction of its CPU the module uses."""
        return self.t_exec * self.load / self.t_it if math.isfinite(self.t_it) else 0.0


@dataclass(frozen=True)
class Overflow:
    """A FIFO consumer slower than its producer: messages pile up on the consumer's node."""

    consumer: str
    producer: str
    consumer_ms: float
    producer_ms: float


@dataclass(frozen=True)
class Solution:
    """Every instance's prediction and what the model found about the mapping's structure."""

    modules: dict[str, ModulePrediction]
    edges: list[Edge]
    overflows: list[Overflow]
    predecessor_cycles: list[list[str]]
    mixed_cycles: list[list[str]]
    shared_nodes: dict[str, list[str]]
    oscillating: list[str]
    passes: int
    bottlenecks: dict[str, list[str]] = field(default_factory=dict)

    @property
    def starved(self) -> list[str]:
        """Modules given no CPU at all (every CPU of their node was full)."""
        return [m.name for m in self.modules.values() if m.ld_c <= 0]


def solve(mapping: Mapping, policy: str = "seed") -> Solution:
    """Predict T_cexec, LD_c and T_it of every instance of ``mapping``. ``policy``: "seed"
    (the paper's printed allocation) or "shared" (fair sharing,
    :mod:`studies.pipeline_mapping.model.sharing`)."""
    if policy not in POLICIES:
        raise MappingError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    mapping.validate()
    insts = mapping.instances()
    by_name = {i.name: i for i in insts}
    edges = mapping.edges()
    fifo_edges = [e for e in edges if e.kind == "fifo"]
    fifo = [(e.src, e.dst) for e in fifo_edges]
    sync = sync_structure(list(by_name), fifo)
    node_of = {i.name: i.node for i in insts}
    mixed = mixed_cycles(node_of, fifo)
    per_node: dict[str, list[Instance]] = {}
    for i in insts:
        per_node.setdefault(i.node, []).append(i)
    cpus = {n.name: n.cpus for n in mapping.nodes}
    groups = {m: f"cycle {sync.cycle_of[m]}" if m in sync.cycle_of else m for m in by_name}
    inside = {(e.src, e.dst): e.transfer for e in fifo_edges}
    if policy == "seed":
        sched = _seed_schedule(sync, mixed, per_node, cpus, groups, inside)
    else:
        sched = _shared_schedule(sync, insts, cpus, groups, inside)
    shares, t_it, t_io, oscillating, ranges, passes = sched
    modules = {
        m: ModulePrediction(m, i.module, i.node, shares[m].cpu, i.t_exec, i.load, t_io[m],
                            shares[m].t_cexec, shares[m].ld_c, t_it[m], ranges[m])
        for m, i in by_name.items()}
    return Solution(
        modules, edges, overflows(sync, modules, inside),
        sync.predecessor_cycles(), mixed,
        {n: [i.name for i in ms] for n, ms in per_node.items() if len(ms) > 1},
        oscillating, passes,
        {m: bottleneck(sync, modules, inside, m) for m in by_name})


Schedule = tuple[dict[str, Share], dict[str, float], dict[str, float], list[str],
                 dict[str, tuple[float, float]], int]


def _seed_schedule(sync: SyncStructure, mixed: list[list[str]],
                   per_node: dict[str, list[Instance]], cpus: dict[str, int],
                   groups: dict[str, str], inside: dict[tuple[str, str], float]) -> Schedule:
    """The paper's passes: order by T_I/O, allocate, until the orders repeat."""
    by_name = {i.name: i for ms in per_node.values() for i in ms}
    in_mixed = {m for c in mixed for m in c}
    eq8 = {n for n, ms in per_node.items()
           if len(ms) > 1 and ms[0].name in in_mixed and _one_component(sync, ms)}
    t_cexec = {m: i.t_exec for m, i in by_name.items()}
    history: list[tuple] = []
    snapshots: list[tuple[dict[str, Share], dict[str, float], dict[str, float]]] = []
    orbit_start = None
    for _ in range(MAX_PASSES):
        t_it = iteration_times(sync, t_cexec, inside)
        t_io = {m: io_time(by_name[m], sync, t_it) for m in by_name}
        order = tuple((n, tuple(_priority(ms, n in eq8, t_io))) for n, ms in per_node.items())
        if history and order == history[-1]:
            break
        if order in history:
            orbit_start = history.index(order)
            break
        history.append(order)
        shares = {}
        for n, names in order:
            shares.update(allocate([_task(by_name[m], groups) for m in names], cpus[n]))
        t_cexec = {m: s.t_cexec for m, s in shares.items()}
        snapshots.append((shares, iteration_times(sync, t_cexec, inside), t_io))
    else:
        orbit_start = max(0, len(history) - 10)
    shares, t_it, t_io = snapshots[-1]
    oscillating: list[str] = []
    ranges = {m: (t, t) for m, t in t_it.items()}
    if orbit_start is not None:
        orbit = history[orbit_start:]
        oscillating = [m for m in by_name if len({_rank(o, m) for o in orbit}) > 1]
        for _, tit, _ in snapshots[orbit_start:]:
            ranges = {m: (min(lo, tit[m]), max(hi, tit[m])) for m, (lo, hi) in ranges.items()}
    else:
        _check_orderable(mixed, per_node, eq8, sync, t_it, t_io, shares, groups, cpus)
    return shares, t_it, t_io, oscillating, ranges, len(history)


def _shared_schedule(sync: SyncStructure, insts: Sequence[Instance], cpus: dict[str, int],
                     groups: dict[str, str], inside: dict[tuple[str, str], float]) -> Schedule:
    """Fair sharing iterated to its fixed point (damped by half each step)."""
    runners = [Runner(i.name, i.node, cpus[i.node], i.cpu, i.t_exec * i.load,
                      i.t_exec * (1 - i.load), groups[i.name]) for i in insts]
    t_cexec = {r.name: r.busy + r.sleep for r in runners}
    share = dict.fromkeys(t_cexec, 1.0)
    steps, done = 0, False
    while not done and steps < MAX_SHARED_STEPS:
        steps += 1
        t_it = iteration_times(sync, t_cexec, inside)
        runnable = {r.name: min(1.0, (t_cexec[r.name] - r.sleep) / t_it[r.name])
                    for r in runners}
        share = shares_of(runners, runnable)
        new = {r.name: 0.5 * t_cexec[r.name] + 0.5 * (r.sleep + r.busy / share[r.name])
               for r in runners}
        done = max(abs(new[m] - t_cexec[m]) / t_cexec[m] for m in new) < 1e-10
        t_cexec = new
    t_it = iteration_times(sync, t_cexec, inside)
    by_name = {i.name: i for i in insts}
    t_io = {m: io_time(by_name[m], sync, t_it) for m in by_name}
    out = {r.name: Share(r.cpu, r.busy / t_cexec[r.name], t_cexec[r.name]) for r in runners}
    return out, t_it, t_io, [], {m: (t, t) for m, t in t_it.items()}, steps


def iteration_times(sync: SyncStructure, t_cexec: dict[str, float],
                    transfer: dict[tuple[str, str], float]) -> dict[str, float]:
    """T_it of every module: Eq. 3 and 4 along FIFO edges, Eq. 5 around synchronous cycles
    (a cycle that also has inputs from outside waits for the slowest of them too)."""
    t_it: dict[str, float] = {}
    for scc in sync.sccs:
        own = own_time(sync, scc, t_cexec, transfer)
        members = set(scc)
        waits = [t_it[i] for m in scc for i in sync.inputs[m] if i not in members]
        t = max([own, *waits])
        t_it.update({m: t for m in scc})
    return t_it


def own_time(sync: SyncStructure, scc: Sequence[str], t_cexec: dict[str, float],
             transfer: dict[tuple[str, str], float]) -> float:
    """The time a module, or a synchronous cycle (Eq. 5), needs for one iteration by itself."""
    if scc[0] not in sync.cycle_of:
        return t_cexec[scc[0]]
    members = set(scc)
    return sum(t_cexec[m] for m in scc) + sum(
        t for (a, b), t in transfer.items() if a in members and b in members)


def io_time(inst: Instance, sync: SyncStructure, t_it: dict[str, float]) -> float:
    """T_I/O: Eq. 6 for a predecessor, Eq. 7 for a module waiting for FIFO inputs."""
    if sync.is_predecessor(inst.name):
        return inst.t_exec * (1.0 - inst.load)
    slowest = max(t_it[i] for i in sync.inputs[inst.name])
    return max(inst.t_exec, slowest) - inst.t_exec * inst.load


def io_share(inst: Instance, sync: SyncStructure, t_it: dict[str, float],
             t_io: dict[str, float]) -> float:
    """The share of its iteration a module waits: what the Linux scheduler ranks by."""
    waits = [t_it[i] for i in sync.inputs[inst.name]]
    return t_io[inst.name] / max([inst.t_exec, *waits])


def overflows(sync: SyncStructure, modules: dict[str, ModulePrediction],
              transfer: dict[tuple[str, str], float]) -> list[Overflow]:
    """FIFO edges whose consumer (or the synchronous cycle it is in) is slower than the
    producer's iteration time (seed §IV-B: T_cexec(m) > T_it(i), i ∈ IM_s(m))."""
    t_cexec = {m: p.t_cexec for m, p in modules.items()}
    scc_of = {m: scc for scc in sync.sccs for m in scc}
    out = []
    for m in modules:
        for i in sync.inputs[m]:
            if i in scc_of[m]:
                continue
            own = own_time(sync, scc_of[m], t_cexec, transfer)
            if own > modules[i].t_it * (1 + 1e-9):
                out.append(Overflow(m, i, own, modules[i].t_it))
    return out


def bottleneck(sync: SyncStructure, modules: dict[str, ModulePrediction],
               transfer: dict[tuple[str, str], float], m: str) -> list[str]:
    """The modules whose own time sets T_it(m): m itself or the slowest of its FIFO inputs,
    followed upstream (a whole synchronous cycle when it is one)."""
    t_cexec = {k: p.t_cexec for k, p in modules.items()}
    scc_of = {k: scc for scc in sync.sccs for k in scc}
    while True:
        scc = scc_of[m]
        if own_time(sync, scc, t_cexec, transfer) >= modules[m].t_it * (1 - 1e-9):
            return list(scc)
        members = set(scc)
        outside = [i for k in scc for i in sync.inputs[k] if i not in members]
        m = max(outside, key=lambda i: modules[i].t_it)


def _one_component(sync: SyncStructure, insts: Sequence[Instance]) -> bool:
    return len({sync.component[i.name] for i in insts}) == 1 and not any(
        sync.is_predecessor(i.name) for i in insts)


def _priority(insts: Sequence[Instance], by_eq8: bool, t_io: dict[str, float]) -> list[str]:
    key = [i.t_exec * i.load if by_eq8 else -t_io[i.name] for i in insts]
    ranked = sorted(range(len(insts)), key=lambda k: (key[k], k))
    return [insts[k].name for k in ranked]


def _task(inst: Instance, groups: dict[str, str]) -> Task:
    return Task(inst.name, inst.t_exec, inst.load, inst.cpu, groups[inst.name])


def _rank(order: tuple, m: str) -> int | None:
    for _, names in order:
        if m in names:
            return names.index(m)
    return None


def _check_orderable(mixed: list[list[str]], per_node: dict[str, list[Instance]], eq8: set[str],
                     sync: SyncStructure, t_it: dict[str, float], t_io: dict[str, float],
                     shares: dict[str, Share], groups: dict[str, str],
                     cpus: dict[str, int]) -> None:
    in_mixed = {m: c for c in mixed for m in c}
    for n, insts in per_node.items():
        if n in eq8 or len(insts) < 2 or insts[0].name not in in_mixed:
            continue
        order = sorted(insts, key=lambda i: -t_io[i.name])
        for a, b in zip(order, order[1:], strict=False):
            comparable = (sync.component[a.name] == sync.component[b.name]
                          and not sync.is_predecessor(a.name)
                          and not sync.is_predecessor(b.name))
            if comparable or abs(io_share(a, sync, t_it, t_io)
                                 - io_share(b, sync, t_it, t_io)) > SHARE_TIE:
                continue
            swapped = [b if i is a else a if i is b else i for i in order]
            other = allocate([_task(i, groups) for i in swapped], cpus[n])
            if any(abs(other[i.name].ld_c - shares[i.name].ld_c) > 1e-9 for i in insts):
                cycle = in_mixed[a.name]
                raise UnorderableCycle(
                    f"node {n!r}: modules {a.name!r} and {b.name!r} wait for the same share of "
                    f"their iteration ({io_share(a, sync, t_it, t_io):.0%}) and the model "
                    f"cannot order them in the cycle {' / '.join(cycle)}; which one is slowed "
                    "depends on the scheduler: map one of them elsewhere or pin them to CPUs")
