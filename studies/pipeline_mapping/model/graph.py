"""The graph structure of a mapping: G_sync's components and cycles, G_dep's mixed cycles.

G_dep holds the synchronisation edges plus bidirected edges between co-located modules.

§IV-B of Jubertie, Melin: "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def strongly_connected(vertices: Sequence[str],
                       edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, sources first (a topological order of the
    condensation); members in declaration order."""
    succ: dict[str, list[str]] = {v: [] for v in vertices}
    for a, b in edges:
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    position = {v: i for i, v in enumerate(vertices)}
    for root in vertices:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    found.append(sorted(comp, key=position.__getitem__))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[v] = min(low[v], index[child])
    found.reverse()
    return found


def weak_components(vertices: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Component number of every vertex, ignoring edge directions (numbered by first member)."""
    parent = {v: v for v in vertices}

    def root(v: str) -> str:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for a, b in edges:
        parent[root(a)] = root(b)
    numbers: dict[str, int] = {}
    return {v: numbers.setdefault(root(v), len(numbers)) for v in vertices}


@dataclass(frozen=True)
class SyncStructure:
    """G_sync read for the model: components, FIFO inputs, cycles and predecessors."""

    inputs: dict[str, list[str]]  # IM_s(m): FIFO sources of m
    component: dict[str, int]  # synchronous component of every module
    sccs: list[list[str]]  # FIFO strongly connected components, sources first
    cycle_of: dict[str, int]  # index in sccs of the synchronous cycle holding m, if any

    def is_predecessor(self, m: str) -> bool:
        """IM_s(m) = ∅: the module waits for no one (Eq. 3)."""
        return not self.inputs[m]

    def predecessor_cycles(self) -> list[list[str]]:
        """Synchronous cycles fed by no module outside them (G_pc, Eq. 5)."""
        out = []
        for i, scc in enumerate(self.sccs):
            members = set(scc)
            if scc[0] in self.cycle_of and self.cycle_of[scc[0]] == i and all(
                    src in members for m in scc for src in self.inputs[m]):
                out.append(scc)
        return out


def sync_structure(modules: Sequence[str], fifo: Sequence[tuple[str, str]]) -> SyncStructure:
    """Build :class:`SyncStructure` from the modules and the FIFO edges (greedy ones removed)."""
    inputs: dict[str, list[str]] = {m: [] for m in modules}
    for a, b in fifo:
        if a not in inputs[b]:
            inputs[b].append(a)
    sccs = strongly_connected(modules, fifo)
    cycle_of = {}
    for i, scc in enumerate(sccs):
        if len(scc) > 1 or scc[0] in inputs[scc[0]]:
            cycle_of.update({m: i for m in scc})
    return SyncStructure(inputs, weak_components(modules, fifo), sccs, cycle_of)


def mixed_cycles(node_of: dict[str, str], fifo: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Sets of co-located modules caught in a cycle of G_dep with directed and bidirected edges.

    Merging the modules of each node (the bidirected edges) into one vertex, a node with two or
    more modules is in a mixed cycle when a FIFO path leaves it and comes back (a FIFO edge
    inside it, or a strongly connected component of the merged graph spanning several nodes).
    Returns the modules of each such strongly connected component, in declaration order.
    """
    nodes = list(dict.fromkeys(node_of.values()))
    merged = {(node_of[a], node_of[b]) for a, b in fifo}
    crowded = {n for n in nodes if sum(1 for v in node_of.values() if v == n) > 1}
    out = []
    for scc in strongly_connected(nodes, sorted(merged)):
        loops = len(scc) > 1 or (scc[0], scc[0]) in merged
        if loops and crowded.intersection(scc):
            out.append([m for m, n in node_of.items() if n in scc])
    return out
