"""What a mapping is (Jubertie & Melin §IV-A): networks, nodes with CPUs, modules, connections.

The paper: Jubertie, Melin, "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".

Units: times in ms, loads as fractions of one CPU in (0, 1], volumes in MB (10⁶ bytes) sent
per iteration of the source, bandwidths in MB/s, latencies in ms.

A module placed on several nodes is a *parallel module* (the paper's MPI modules): each
placement is one instance, named ``name[i]``; a single placement keeps the module's name.
A connection between two modules becomes one edge per instance pair: one-to-one when both
have as many instances, otherwise every source instance to every destination instance; its
volume is what one source instance sends to one destination instance per iteration.
``exchange_MB`` adds the paper's MPI edges (each instance to every other one, every iteration),
which load the networks but do not synchronise (they are outside the FlowVR graph).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

KINDS = ("fifo", "greedy")


class MappingError(ValueError):
    """A mapping that cannot be evaluated; the message names the entry and the problem."""


@dataclass(frozen=True)
class Network:
    """A network: ``bandwidth`` in MB/s, ``latency`` in ms per message."""

    name: str
    bandwidth: float
    latency: float = 0.0


@dataclass(frozen=True)
class Node:
    """A cluster node with ``cpus`` CPUs (cores) and the networks its adapters reach."""

    name: str
    cpus: int
    networks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Placement:
    """Where one instance runs: a node, and a CPU index on it when pinned (else the OS picks)."""

    node: str
    cpu: int | None = None


@dataclass(frozen=True)
class Module:
    """A module: ``t_exec`` ms per iteration alone and unsynchronised, using the CPU for the
    fraction ``load`` of it (the rest is I/O); one placement per instance."""

    name: str
    t_exec: float
    load: float
    placements: tuple[Placement, ...]
    exchange: float = 0.0


@dataclass(frozen=True)
class Connection:
    """A FIFO or greedy (latest-only) connection; several destinations = a broadcast filter."""

    src: str
    dst: tuple[str, ...]
    kind: str = "fifo"
    volume: float = 0.0
    network: str | None = None


@dataclass(frozen=True)
class Instance:
    """One running copy of a module, on one node (and CPU when pinned)."""

    name: str
    module: str
    node: str
    cpu: int | None
    t_exec: float
    load: float


@dataclass(frozen=True)
class Edge:
    """A connection between two instances; ``network`` is None when local (same node)."""

    src: str
    dst: str
    kind: str
    volume: float
    network: str | None
    transfer: float  # ms per message: volume / bandwidth + latency, 0 when local


@dataclass(frozen=True)
class Mapping:
    """A whole mapping; ``validate`` refuses what the model cannot evaluate."""

    networks: tuple[Network, ...]
    nodes: tuple[Node, ...]
    modules: tuple[Module, ...]
    connections: tuple[Connection, ...]
    paths: tuple[tuple[str, ...], ...] = field(default=())

    def validate(self) -> None:
        """Raise :class:`MappingError` naming the first bad entry."""
        _unique("network", [n.name for n in self.networks])
        _unique("node", [n.name for n in self.nodes])
        _unique("module", [m.name for m in self.modules])
        nets = {n.name for n in self.networks}
        for net in self.networks:
            _positive(f"network {net.name!r}", "bandwidth", net.bandwidth)
            _non_negative(f"network {net.name!r}", "latency", net.latency)
        nodes = {n.name: n for n in self.nodes}
        for node in self.nodes:
            if not isinstance(node.cpus, int) or node.cpus < 1:
                raise MappingError(f"node {node.name!r}: cpus must be a whole number >= 1, "
                                   f"got {node.cpus!r}")
            for net in node.networks:
                if net not in nets:
                    raise MappingError(f"node {node.name!r}: unknown network {net!r}")
        for m in self.modules:
            where = f"module {m.name!r}"
            _positive(where, "time_ms", m.t_exec)
            _positive(where, "load", m.load)
            if m.load > 1:
                raise MappingError(f"{where}: load is a fraction of one CPU, in (0, 1]; "
                                   f"got {m.load}")
            _non_negative(where, "exchange_MB", m.exchange)
            if not m.placements:
                raise MappingError(f"{where}: placed on no node")
            for p in m.placements:
                if p.node not in nodes:
                    raise MappingError(f"{where}: unknown node {p.node!r}")
                cpus = nodes[p.node].cpus
                if p.cpu is not None and not (isinstance(p.cpu, int) and 0 <= p.cpu < cpus):
                    raise MappingError(f"{where}: pinned to CPU {p.cpu!r} but node {p.node!r} "
                                       f"has {cpus} CPU(s), numbered 0..{cpus - 1}")
        names = {m.name for m in self.modules}
        for i, c in enumerate(self.connections, 1):
            where = f"connection {i} ({c.src} -> {', '.join(c.dst) or 'nothing'})"
            for end in (c.src, *c.dst):
                if end not in names:
                    raise MappingError(f"{where}: unknown module {end!r}")
            if not c.dst:
                raise MappingError(f"{where}: has no destination")
            if c.kind not in KINDS:
                raise MappingError(f"{where}: kind must be one of {', '.join(KINDS)}, "
                                   f"got {c.kind!r}")
            _non_negative(where, "volume_MB", c.volume)
            if c.network is not None and c.network not in nets:
                raise MappingError(f"{where}: unknown network {c.network!r}")
        for path in self.paths:
            for name in path:
                if name not in names:
                    raise MappingError(f"latency path {' -> '.join(path)}: unknown module "
                                       f"{name!r}")

    def instances(self) -> list[Instance]:
        """Every module instance, in declaration order."""
        out = []
        for m in self.modules:
            for i, p in enumerate(m.placements):
                name = m.name if len(m.placements) == 1 else f"{m.name}[{i}]"
                out.append(Instance(name, m.name, p.node, p.cpu, m.t_exec, m.load))
        return out

    def edges(self) -> list[Edge]:
        """Every instance-to-instance edge: the connections' (FIFO, greedy) and the MPI ones."""
        groups: dict[str, list[Instance]] = {}
        for inst in self.instances():
            groups.setdefault(inst.module, []).append(inst)
        out = []
        for c in self.connections:
            for dst in c.dst:
                for a, b in _pairs(groups[c.src], groups[dst]):
                    out.append(self._edge(a, b, c.kind, c.volume, c.network))
        for m in self.modules:
            if m.exchange > 0:
                out += [self._edge(a, b, "mpi", m.exchange, None)
                        for a in groups[m.name] for b in groups[m.name] if a is not b]
        return out

    def _edge(self, a: Instance, b: Instance, kind: str, volume: float,
              network: str | None) -> Edge:
        if a.node == b.node:
            return Edge(a.name, b.name, kind, volume, None, 0.0)
        nodes = {n.name: n for n in self.nodes}
        nets = {n.name: n for n in self.networks}
        common = [n for n in nodes[a.node].networks if n in nodes[b.node].networks]
        where = f"connection {a.name} -> {b.name}"
        if network is None:
            if not common:
                raise MappingError(f"{where}: nodes {a.node!r} and {b.node!r} share no network")
            network = common[0]
        elif network not in common:
            raise MappingError(f"{where}: network {network!r} does not reach both nodes "
                               f"{a.node!r} and {b.node!r}")
        net = nets[network]
        return Edge(a.name, b.name, kind, volume, network,
                    1e3 * volume / net.bandwidth + net.latency)


def _pairs(src: Sequence[Instance], dst: Sequence[Instance]) -> list[tuple[Instance, Instance]]:
    if len(src) == len(dst):
        return list(zip(src, dst, strict=True))
    return [(a, b) for a in src for b in dst]


def _unique(kind: str, names: list[str]) -> None:
    seen = set()
    for name in names:
        if not isinstance(name, str) or not name:
            raise MappingError(f"a {kind} has no name")
        if name in seen:
            raise MappingError(f"{kind} {name!r} is declared twice")
        seen.add(name)


def _positive(where: str, key: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise MappingError(f"{where}: {key} must be a finite number > 0, got {value!r}")


def _non_negative(where: str, key: str, value: float) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise MappingError(f"{where}: {key} must be a finite number >= 0, got {value!r}")
