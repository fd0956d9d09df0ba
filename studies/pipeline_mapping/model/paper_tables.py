"""The paper's test cases (Tables I–VI) as mappings with their printed predictions.

The benchmark and the tests check with them whether the model reproduces the tables.

The paper: Jubertie, Melin, "Performance Prediction for Mappings of Distributed Applications
on PC Clusters".

Times in ms. Tables I–IV and VI are the printed predictions. Table V lists what the printed
algorithm gives (``expected``) beside the printed table (``printed``): Eq. 6 orders the
modules m4, m2, m3, m1, and the loop then gives m1 47.6/0.42, m2 16/0.30, m3 14.3/0.35,
m4 51/0.58, where the table prints m1 38/0.42, m2 32/0.15, m3 10/0.50, m4 51/0.58. Table VI's
LD_c column is T_exec·LD/T_it, printed to two decimals (the viewer's 28 x 0.97 / 70 = 0.388
is printed 0.40, hence the 0.015 tolerance on that column only).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from studies.pipeline_mapping.model.description import (
    Connection,
    Mapping,
    Module,
    Network,
    Node,
    Placement,
)
from studies.pipeline_mapping.model.solve import Solution, solve

GIGE = (Network("gige", 100.0, 0.0),)  # the paper's gigabit Ethernet taken as 100 MB/s


@dataclass(frozen=True)
class TableCase:
    """One table: the mapping and, per module, the expected figures (``t_it``, ``t_cexec``,
    ``ld_c``, ``cpu_load``) with the tolerance of each."""

    name: str
    mapping: Mapping
    expected: dict[str, dict[str, float]]
    tolerance: dict[str, float]
    overflow: bool = False
    printed: dict[str, dict[str, float]] = field(default_factory=dict)


def _module(name: str, t_exec: float, load: float, *nodes: str) -> Module:
    return Module(name, t_exec, load, tuple(Placement(n) for n in nodes))


def _nodes(*names: str, cpus: int = 2) -> tuple[Node, ...]:
    return tuple(Node(n, cpus, ("gige",)) for n in names)


def _pair(src: str, dst: str, kind: str) -> Mapping:
    return Mapping(GIGE, _nodes("n1", "n2"),
                   (_module("m1", 37, 1.0, "n1"), _module("m2", 18, 0.5, "n2")),
                   (Connection(src, (dst,), kind),))


def _ring(*nodes: str) -> Mapping:
    mods = (_module("m1", 37, 1.0, nodes[0]), _module("m2", 26, 0.5, nodes[1]),
            _module("m3", 21, 0.5, nodes[2]))
    ring = tuple(Connection(a, (b,), "fifo", 5.0) for a, b in
                 (("m1", "m2"), ("m2", "m3"), ("m3", "m1")))
    return Mapping(GIGE, _nodes(*dict.fromkeys(nodes)), mods, ring)


def fluid_particle() -> Mapping:
    """Table VI's mapping: fluid x4 on each quad-core node 11-18, particles and viewer on the
    dual nodes 5-8, a renderer on each of nodes 1-4, the joypad (greedy, ignored) on node 1."""
    sim = [f"s{i}" for i in range(11, 19)]
    vis = [f"v{i}" for i in range(5, 9)]
    ren = [f"r{i}" for i in range(1, 5)]
    return Mapping(
        GIGE, _nodes(*sim, cpus=4) + _nodes(*vis) + _nodes(*ren),
        (_module("fluid", 70, 0.97, *[n for n in sim for _ in range(4)]),
         _module("particles", 20, 0.97, *vis), _module("viewer", 28, 0.97, *vis),
         _module("renderer", 57, 0.97, *ren), _module("joypad", 0.5, 0.005, "r1")),
        (Connection("fluid", ("particles",)), Connection("particles", ("viewer",)),
         Connection("viewer", ("renderer",), "greedy"),
         Connection("joypad", ("fluid",), "greedy")))


def table_cases() -> list[TableCase]:
    """Tables I–VI and the inverted FIFO of §V-A."""
    exact = {"t_it": 1e-9, "t_cexec": 1e-9}
    table_v = {"m1": (20, 1.00), "m2": (16, 0.30), "m3": (10, 0.50), "m4": (51, 0.58)}
    return [
        TableCase("Table I (greedy)", _pair("m1", "m2", "greedy"),
                  {"m1": {"t_it": 37}, "m2": {"t_it": 18}}, exact),
        TableCase("Table II (FIFO)", _pair("m1", "m2", "fifo"),
                  {"m1": {"t_it": 37}, "m2": {"t_it": 37}}, exact),
        TableCase("inverted FIFO (overflow)", _pair("m2", "m1", "fifo"),
                  {"m1": {"t_it": 37}, "m2": {"t_it": 18}}, exact, overflow=True),
        TableCase("Table III (cycle on 3 nodes)", _ring("n1", "n2", "n3"),
                  {m: {"t_it": 234} for m in ("m1", "m2", "m3")}, exact),
        TableCase("Table IV (cycle on one node)", _ring("n1", "n1", "n1"),
                  {m: {"t_it": 84} for m in ("m1", "m2", "m3")}, exact),
        TableCase("Table V (as the printed algorithm gives it)",
                  Mapping(GIGE, _nodes("n1"),
                          tuple(_module(k, t, ld, "n1") for k, (t, ld) in table_v.items()), ()),
                  {"m1": {"t_cexec": 47.6, "ld_c": 0.42}, "m2": {"t_cexec": 16.0, "ld_c": 0.30},
                   "m3": {"t_cexec": 14.3, "ld_c": 0.35}, "m4": {"t_cexec": 51.0, "ld_c": 0.58}},
                  {"t_cexec": 0.05, "ld_c": 0.005},
                  printed={"m1": {"t_cexec": 38, "ld_c": 0.42},
                           "m2": {"t_cexec": 32, "ld_c": 0.15},
                           "m3": {"t_cexec": 10, "ld_c": 0.50},
                           "m4": {"t_cexec": 51, "ld_c": 0.58}}),
        TableCase("Table VI (FluidParticle)", fluid_particle(),
                  {"fluid": {"t_cexec": 70, "t_it": 70, "cpu_load": 0.97},
                   "particles": {"t_cexec": 20, "t_it": 70, "cpu_load": 0.28},
                   "viewer": {"t_cexec": 28, "t_it": 70, "cpu_load": 0.40},
                   "renderer": {"t_cexec": 57, "t_it": 57, "cpu_load": 0.97}},
                  {**exact, "cpu_load": 0.015}),
    ]


def check(case: TableCase) -> tuple[Solution, list[str]]:
    """Solve the case; the differences from its expected figures (empty when reproduced)."""
    s = solve(case.mapping)
    diffs = []
    for p in s.modules.values():
        for key, want in case.expected.get(p.module, {}).items():
            got = getattr(p, key)
            if abs(got - want) > case.tolerance[key]:
                diffs.append(f"{p.name} {key}: {got:.4g}, expected {want:g}")
    if bool(s.overflows) != case.overflow:
        diffs.append(f"overflow predicted: {bool(s.overflows)}, expected {case.overflow}")
    return s, diffs
