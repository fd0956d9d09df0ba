"""Try the mappings of a pipeline's modules onto its nodes (and CPUs) and rank them by the
predicted frame rate: the question "which rank on which node or core" (issue 22).

Candidates are deduplicated: instances of one parallel module are interchangeable, so are
nodes with the same CPUs and networks, and CPUs of one node when pinning.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from studies.pipeline_mapping.model.description import Mapping, MappingError, Module, Placement
from studies.pipeline_mapping.model.frame import frame_time
from studies.pipeline_mapping.model.network import link_loads, path_latency
from studies.pipeline_mapping.model.solve import Solution, solve


@dataclass(frozen=True)
class Candidate:
    """One mapping tried: its frame time (:func:`frame_time`, ∞ when the model cannot order
    it) and what is wrong with it (overflows, oscillations, starved modules, overloads)."""

    mapping: Mapping
    solution: Solution | None
    frame_ms: float
    problems: tuple[str, ...]
    latency_ms: float = math.inf  # sum of the mapping's latency paths (Eq. 11)
    network_MBps: float = math.inf  # all that its nodes send over networks (Eq. 9)

    @property
    def fps(self) -> float:
        """Predicted frames per second."""
        return 1e3 / self.frame_ms if 0 < self.frame_ms < math.inf else 0.0


def evaluate(mapping: Mapping, frame: Sequence[str], policy: str = "seed") -> Candidate:
    """Solve one mapping and list its problems."""
    try:
        s = solve(mapping, policy)
    except MappingError as exc:
        return Candidate(mapping, None, math.inf, (str(exc),))
    problems = [f"buffer overflow: {o.consumer} ({o.consumer_ms:.1f} ms) is slower than "
                f"{o.producer} ({o.producer_ms:.1f} ms)" for o in s.overflows]
    if s.oscillating:
        problems.append(f"oscillating: {', '.join(s.oscillating)}")
    problems += [f"starved: {m}" for m in s.starved]
    for ld in link_loads(mapping, s):
        if ld.send_overflow:
            problems.append(f"{ld.node} sends {ld.send:.0f} MB/s on {ld.network} "
                            f"({ld.bandwidth:g} MB/s)")
        if ld.receive_contention:
            problems.append(f"{ld.node} receives {ld.receive:.0f} MB/s on {ld.network} "
                            f"({ld.bandwidth:g} MB/s)")
    frame_ms = frame_time(s, frame)[0]
    latency = sum(path_latency(s, p) for p in mapping.paths)
    sent = sum(ld.send for ld in link_loads(mapping, s))
    return Candidate(mapping, s, frame_ms, tuple(problems), latency, sent)


def search(mapping: Mapping, frame: Sequence[str], fixed: frozenset[str] = frozenset(),
           pin: bool = False, limit: int = 100_000, policy: str = "seed") -> list[Candidate]:
    """Every distinct mapping, best first: those without problems by frame time, then the rest;
    ties go to the lower latency, then to the lighter network load."""
    found = [evaluate(m, frame, policy) for m in candidates(mapping, fixed, pin, limit)]
    return sorted(found, key=lambda c: (bool(c.problems), round(c.frame_ms, 9),
                                        round(c.latency_ms, 9), c.network_MBps))


def candidates(mapping: Mapping, fixed: frozenset[str] = frozenset(), pin: bool = False,
               limit: int = 100_000) -> list[Mapping]:
    """The distinct mappings of the movable modules' instances onto the nodes (each instance
    pinned to a CPU too with ``pin``); ``fixed`` modules keep their placements."""
    mapping.validate()
    movable = [m for m in mapping.modules if m.name not in fixed]
    nodes = [n.name for n in mapping.nodes]
    count = math.prod(math.comb(len(nodes) + len(m.placements) - 1, len(m.placements))
                      for m in movable)
    if count > limit:
        raise MappingError(f"--search: {count:,} ways to place the modules, more than "
                           f"{limit:,}; fix some modules in place (fixed = true) or use fewer "
                           "nodes")
    kind = {n.name: (n.cpus, tuple(sorted(n.networks))) for n in mapping.nodes}
    cpus = {n.name: n.cpus for n in mapping.nodes}
    seen: set = set()
    out = []
    choices = [itertools.combinations_with_replacement(nodes, len(m.placements))
               for m in movable]
    for pick in itertools.product(*choices):
        placed = dict(zip((m.name for m in movable), pick, strict=True))
        modules = [replace(m, placements=tuple(Placement(n) for n in placed[m.name]))
                   if m.name in placed else m for m in mapping.modules]
        for pinned in (_pinnings(modules, cpus, fixed) if pin else [modules]):
            key = _canonical(pinned, kind)
            if key not in seen:
                seen.add(key)
                out.append(replace(mapping, modules=tuple(pinned)))
                if len(out) > limit:
                    raise MappingError(f"--search: more than {limit:,} pinnings; fix some "
                                       "modules in place (fixed = true) or use fewer nodes")
    return out


def _canonical(modules: Sequence[Module], kind: dict[str, tuple]) -> tuple:
    per_node: dict[str, list[tuple[str, int | None]]] = {n: [] for n in kind}
    for m in modules:
        for p in m.placements:
            per_node[p.node].append((m.name, p.cpu))
    content = {}
    for n, entries in per_node.items():
        by_cpu: dict[int | None, list[str]] = {}
        for name, cpu in entries:
            by_cpu.setdefault(cpu, []).append(name)
        unpinned = tuple(sorted(by_cpu.pop(None, [])))
        content[n] = (unpinned, tuple(sorted(tuple(sorted(v)) for v in by_cpu.values())))
    classes: dict[tuple, list] = {}
    for n, c in content.items():
        classes.setdefault(kind[n], []).append(c)
    return tuple(sorted((k, tuple(sorted(v))) for k, v in classes.items()))


def _pinnings(modules: Sequence[Module], cpus: dict[str, int],
              fixed: frozenset[str]) -> Iterator[list[Module]]:
    """Every way to pin the movable instances of each node to its CPUs (restricted growth
    strings: CPU k is used only after CPU k - 1, so CPU renumberings are not repeated)."""
    slots: dict[str, list[tuple[int, int]]] = {}
    for i, m in enumerate(modules):
        if m.name not in fixed:
            for j, p in enumerate(m.placements):
                slots.setdefault(p.node, []).append((i, j))
    per_node = [[(s, rgs) for rgs in _growth_strings(len(s), cpus[n])]
                for n, s in slots.items()]
    for combo in itertools.product(*per_node):
        placements = [list(m.placements) for m in modules]
        for slot, rgs in combo:
            for (i, j), cpu in zip(slot, rgs, strict=True):
                placements[i][j] = Placement(placements[i][j].node, cpu)
        yield [replace(m, placements=tuple(p)) for m, p in zip(modules, placements, strict=True)]


def _growth_strings(n: int, blocks: int) -> Iterator[tuple[int, ...]]:
    def grow(prefix: tuple[int, ...], used: int) -> Iterator[tuple[int, ...]]:
        if len(prefix) == n:
            yield prefix
            return
        for k in range(min(used + 1, blocks)):
            yield from grow((*prefix, k), max(used, k + 1))

    yield from grow((), 0)
