"""``autotune mapping FILE.toml``: a pipeline's predicted performance from its mapping
(Jubertie, Melin: "Performance Prediction for Mappings of Distributed Applications on PC
Clusters"; issue 22).

Prints every module's predicted iteration time, CPU share and load, the frame rate and its
bottleneck, buffer overflows, oscillations, network load and path latencies. ``--search``
tries the mappings of the modules onto the file's nodes (and CPUs with ``--pin``) and prints
the best few by predicted frame rate.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from autotune_app import options as opt
from autotune_app.report import emit
from studies.pipeline_mapping.mapping_file import load_mapping
from studies.pipeline_mapping.model import link_loads, path_latency, solve
from studies.pipeline_mapping.model.frame import frame_time
from studies.pipeline_mapping.model.search import search


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``autotune mapping``."""
    text = ("predict each module's iteration time, CPU load, the bottleneck, overflows and "
            "latency of a pipeline from its mapping onto nodes and CPUs (pipeline mapping, "
            "Jubertie & Melin)")
    p = sub.add_parser("mapping", help=text, description=text, formatter_class=opt.HelpFormatter)
    p.add_argument("file", type=Path, metavar="FILE.toml",
                   help="mapping description (examples in assets/mappings/)")
    p.add_argument("--search", action="store_true",
                   help="try the mappings of the modules onto the nodes; print the best few")
    p.add_argument("--pin", action="store_true",
                   help="with --search: also pin every instance to a CPU of its node")
    p.add_argument("--top", type=opt.positive_int, default=5,
                   help="with --search: how many mappings to print")
    p.add_argument("--policy", choices=("seed", "shared"), default="seed",
                   help="CPU allocation: the paper's printed one (waiting modules first, each "
                        "keeps its load on its CPU), or fair sharing as Linux does it "
                        "(closer to measurements on this machine; see docs/studies.md)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def cmd_mapping(args: argparse.Namespace) -> int:
    """Run ``autotune mapping``."""
    loaded = load_mapping(args.file)
    if args.pin and not args.search:
        raise ValueError("--pin goes with --search")
    if args.search:
        figures = search_figures(loaded, args.pin, args.top, args.policy)
        if args.json:
            emit(figures, True)
        else:
            print_search(figures)
        return 0
    figures = prediction_figures(loaded.mapping, solve(loaded.mapping, args.policy),
                                 loaded.frame)
    figures = {"file": str(args.file), "policy": args.policy, **figures}
    if args.json:
        emit(figures, True)
    else:
        print_prediction(figures)
    return 0


def prediction_figures(mapping: Any, solution: Any, frame: tuple[str, ...]) -> dict[str, Any]:
    """The figures of one solved mapping, JSON-ready (times in ms, rates in MB/s)."""
    mods = solution.modules
    frame_ms, bottleneck = frame_time(solution, frame)
    return {
        "frame": {"modules": list(frame), "ms": frame_ms,
                  "fps": 1e3 / frame_ms if 0 < frame_ms < float("inf") else 0.0,
                  "bottleneck": bottleneck},
        "modules": [{"name": p.name, "node": p.node, "cpu": p.cpu, "t_exec_ms": p.t_exec,
                     "load": p.load, "t_io_ms": p.t_io, "t_cexec_ms": p.t_cexec,
                     "ld_c": p.ld_c, "t_it_ms": p.t_it, "t_it_range_ms": list(p.t_it_range),
                     "fps": p.frequency, "cpu_load": p.cpu_load} for p in mods.values()],
        "overflows": [{"consumer": o.consumer, "producer": o.producer,
                       "consumer_ms": o.consumer_ms, "producer_ms": o.producer_ms}
                      for o in solution.overflows],
        "oscillating": solution.oscillating,
        "starved": solution.starved,
        "cycles": {"predecessor": solution.predecessor_cycles, "mixed": solution.mixed_cycles,
                   "shared_nodes": solution.shared_nodes},
        "network": [{"node": ld.node, "network": ld.network, "send_MBps": ld.send,
                     "receive_MBps": ld.receive, "bandwidth_MBps": ld.bandwidth,
                     "send_overflow": ld.send_overflow,
                     "receive_contention": ld.receive_contention}
                    for ld in link_loads(mapping, solution)],
        "latency": [{"path": list(path), "ms": path_latency(solution, path)}
                    for path in mapping.paths],
    }


def print_prediction(f: dict[str, Any]) -> None:
    """The figures of :func:`prediction_figures` as text."""
    print(f"autotune mapping: {f['file']} (CPU allocation: {f['policy']})")
    print(f"  {'module':<16}{'node':<10}{'cpu':>4}{'T_exec':>9}{'LD':>6}{'T_cexec':>9}"
          f"{'LD_c':>6}{'T_it':>9}{'fps':>8}{'load':>6}")
    for m in f["modules"]:
        lo, hi = m["t_it_range_ms"]
        t_it = f"{m['t_it_ms']:.1f}" if lo == hi else f"{lo:.0f}-{hi:.0f}"
        cpu = "any" if m["cpu"] is None else m["cpu"]
        print(f"  {m['name']:<16}{m['node']:<10}{cpu:>4}{m['t_exec_ms']:>9.1f}"
              f"{m['load']:>6.2f}{m['t_cexec_ms']:>9.1f}{m['ld_c']:>6.2f}{t_it:>9}"
              f"{m['fps']:>8.1f}{m['cpu_load']:>6.2f}")
    fr = f["frame"]
    print(f"frame ({', '.join(fr['modules'])}): {fr['ms']:.1f} ms, {fr['fps']:.1f} fps; "
          f"bottleneck: {', '.join(fr['bottleneck'])}")
    for o in f["overflows"]:
        print(f"BUFFER OVERFLOW: {o['consumer']} needs {o['consumer_ms']:.1f} ms per message, "
              f"{o['producer']} sends one every {o['producer_ms']:.1f} ms")
    if f["oscillating"]:
        print(f"OSCILLATING: the scheduler's order of {', '.join(f['oscillating'])} keeps "
              "changing; their times swing over the ranges shown")
    for m in f["starved"]:
        print(f"STARVED: {m} gets no CPU (its node's CPUs are full)")
    for cycle in f["cycles"]["predecessor"]:
        print(f"synchronous cycle: {' -> '.join(cycle)}")
    for cycle in f["cycles"]["mixed"]:
        print(f"interdependent (cycle through shared CPUs): {', '.join(cycle)}")
    for ld in f["network"]:
        flag = (" SEND OVERFLOW" if ld["send_overflow"] else "") + (
            " RECEIVE CONTENTION" if ld["receive_contention"] else "")
        print(f"network {ld['network']} at {ld['node']}: sends {ld['send_MBps']:.1f}, "
              f"receives {ld['receive_MBps']:.1f} of {ld['bandwidth_MBps']:g} MB/s{flag}")
    for lat in f["latency"]:
        print(f"latency {' -> '.join(lat['path'])}: {lat['ms']:.1f} ms")


def search_figures(loaded: Any, pin: bool, top: int, policy: str) -> dict[str, Any]:
    """The best ``top`` mappings of :func:`studies.pipeline_mapping.model.search.search`,
    JSON-ready."""
    found = search(loaded.mapping, loaded.frame, loaded.fixed, pin, policy=policy)
    return {"file": str(loaded.path), "frame": list(loaded.frame), "policy": policy,
            "candidates": len(found),
            "best": [{"rank": k, "fps": c.fps, "frame_ms": c.frame_ms,
                      "latency_ms": c.latency_ms, "network_MBps": c.network_MBps,
                      "placement": placement(c.mapping), "problems": list(c.problems)}
                     for k, c in enumerate(found[:top], 1)]}


def placement(mapping: Any) -> dict[str, list[str]]:
    """Where every module's instances run, as ``node`` or ``node:cpu``."""
    return {m.name: [p.node if p.cpu is None else f"{p.node}:{p.cpu}" for p in m.placements]
            for m in mapping.modules}


def print_search(f: dict[str, Any]) -> None:
    """The figures of :func:`search_figures` as text."""
    print(f"autotune mapping --search: {f['file']}: {f['candidates']} distinct mappings, "
          f"frame = {', '.join(f['frame'])}")
    for c in f["best"]:
        where = "; ".join(f"{m} @ {', '.join(n)}" for m, n in c["placement"].items())
        print(f"{c['rank']:>3}. {c['fps']:7.1f} fps ({c['frame_ms']:.1f} ms), latency "
              f"{c['latency_ms']:.1f} ms, {c['network_MBps']:.1f} MB/s sent  {where}")
        for problem in c["problems"]:
            print(f"       ! {problem}")
