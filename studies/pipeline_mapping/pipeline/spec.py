"""What one run of a mapping needs, as JSON for the MPI ranks: instances, edges with their
emulated link, the cores of each node on this machine, and the FIFO edges primed with one
message so synchronous cycles can start.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from studies.pipeline_mapping.model import Mapping, MappingError
from studies.pipeline_mapping.model.graph import strongly_connected
from studies.pipeline_mapping.pipeline.work import Work


def node_cores(mapping: Mapping, cores: list[int] | None = None,
               share: bool = False) -> dict[str, list[int]]:
    """This machine's cores for each node, in declaration order, one core per CPU; refuses a
    mapping with more CPUs than the machine has cores (nodes would share cores) unless
    ``share`` (right only when the modules that share a core never run at the same time,
    like the members of one synchronous cycle)."""
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    need = sum(n.cpus for n in mapping.nodes)
    if need > len(cores) and not share:
        raise MappingError(f"the mapping's nodes have {need} CPUs in all; this machine "
                           f"gives {len(cores)} core(s) to run it on")
    out, k = {}, 0
    for n in mapping.nodes:
        out[n.name] = [cores[(k + c) % len(cores)] for c in range(n.cpus)]
        k += n.cpus
    return out


def primed_edges(mapping: Mapping) -> list[int]:
    """FIFO edges that start with one message: the back edges of a depth-first search inside
    each synchronous cycle (without them every module of the cycle waits for ever)."""
    edges = mapping.edges()
    names = [i.name for i in mapping.instances()]
    fifo = [(e.src, e.dst) for e in edges if e.kind == "fifo"]
    scc_of = {m: k for k, scc in enumerate(strongly_connected(names, fifo)) for m in scc}
    succ: dict[str, list[int]] = {m: [] for m in names}
    for k, e in enumerate(edges):
        if e.kind == "fifo" and scc_of[e.src] == scc_of[e.dst]:
            succ[e.src].append(k)
    primed, state = [], dict.fromkeys(names, 0)  # 0 new, 1 on the stack, 2 done
    for root in names:
        if state[root]:
            continue
        state[root] = 1
        stack = [(root, iter(succ[root]))]
        while stack:
            m, it = stack[-1]
            k = next(it, None)
            if k is None:
                state[m] = 2
                stack.pop()
                continue
            dst = edges[k].dst
            if state[dst] == 1:
                primed.append(k)
            elif state[dst] == 0:
                state[dst] = 1
                stack.append((dst, iter(succ[dst])))
    return sorted(primed)


def run_spec(mapping: Mapping, seconds: float, cores: list[int] | None = None,
             share: bool = False, work: dict[str, Work] | None = None) -> dict[str, Any]:
    """The JSON the ranks read: rank k runs instance k (``share``: see :func:`node_cores`);
    the modules named in ``work`` do that real work, the others busy work."""
    mapping.validate()
    work = work or {}
    unknown = sorted(set(work) - {m.name for m in mapping.modules})
    if unknown:
        raise MappingError(f"work given for unknown module(s): {', '.join(unknown)}")
    nets = {n.name: n for n in mapping.networks}
    return {
        "seconds": seconds,
        "instances": [{"name": i.name, "node": i.node, "cpu": i.cpu, "t_exec": i.t_exec,
                       "load": i.load,
                       "work": asdict(work[i.module]) if i.module in work else None}
                      for i in mapping.instances()],
        "edges": [{"src": e.src, "dst": e.dst, "kind": e.kind, "volume": e.volume,
                   "bandwidth": nets[e.network].bandwidth if e.network else None,
                   "latency": nets[e.network].latency if e.network else 0.0}
                  for e in mapping.edges()],
        "cores": node_cores(mapping, cores, share),
        "primed": primed_edges(mapping),
    }
