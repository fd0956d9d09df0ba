"""Network load and path latency of a solved mapping (Jubertie & Melin §IV-B3, Eqs. 9–11).

The paper: Jubertie, Melin, "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".

Message rates: a FIFO edge and an MPI edge carry F(src) messages per second; a greedy filter
sends the newest message each time its consumer asks, the paper's F(f_greedy) = F(m_dest),
but (our reading) never one it already sent: a greedy edge carries min(F(src), F(dest)).
The filter sits on the producer's node. A broadcast filter passes on every message of its
source: F(src) per destination.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from studies.pipeline_mapping.model.description import Mapping, MappingError
from studies.pipeline_mapping.model.solve import Solution


@dataclass(frozen=True)
class LinkLoad:
    """Eq. 9 and 10 for one node on one network, in MB/s, against the network's bandwidth."""

    node: str
    network: str
    send: float
    receive: float
    bandwidth: float

    @property
    def send_overflow(self) -> bool:
        """bw_s > BW: the node cannot send all its messages; they pile up in its memory."""
        return self.send > self.bandwidth * (1 + 1e-9)

    @property
    def receive_contention(self) -> bool:
        """bw_r > BW: too much is sent to this node; its senders' buffers overflow."""
        return self.receive > self.bandwidth * (1 + 1e-9)


def link_loads(mapping: Mapping, solution: Solution) -> list[LinkLoad]:
    """bw_s and bw_r of every node on every network it uses."""
    f = {m: p.frequency for m, p in solution.modules.items()}
    node = {m: p.node for m, p in solution.modules.items()}
    send: dict[tuple[str, str], float] = {}
    receive: dict[tuple[str, str], float] = {}
    for e in solution.edges:
        if e.network is None:
            continue
        mb_s = e.volume * (min(f[e.src], f[e.dst]) if e.kind == "greedy" else f[e.src])
        send[node[e.src], e.network] = send.get((node[e.src], e.network), 0.0) + mb_s
        receive[node[e.dst], e.network] = receive.get((node[e.dst], e.network), 0.0) + mb_s
    bandwidth = {n.name: n.bandwidth for n in mapping.networks}
    keys = sorted(set(send) | set(receive))
    return [LinkLoad(n, net, send.get((n, net), 0.0), receive.get((n, net), 0.0),
                     bandwidth[net]) for n, net in keys]


def path_latency(solution: Solution, path: Sequence[str]) -> float:
    """Eq. 11 for a path of modules (by module name): Σ T_it + Σ transfer on non-local edges.
    A parallel module counts with its slowest instance, a hop with its slowest edge."""
    modules = solution.modules
    t_it = {}
    for p in modules.values():
        t_it[p.module] = max(t_it.get(p.module, 0.0), p.t_it)
    total = 0.0
    for name in path:
        if name not in t_it:
            raise MappingError(f"latency path {' -> '.join(path)}: unknown module {name!r}")
        total += t_it[name]
    for a, b in zip(path, path[1:], strict=False):
        hops = [e.transfer for e in solution.edges if e.kind != "mpi"
                and modules[e.src].module == a and modules[e.dst].module == b]
        if not hops:
            raise MappingError(f"latency path {' -> '.join(path)}: no connection from {a!r} "
                               f"to {b!r}")
        total += max(hops)
    return total
