"""The pipeline runtime that checks the mapping model for real (issue 22): its pure parts
(cores per node, primed cycle edges, the emulated link, real work in the spec) and short MPI
runs, one of them with this project's real renderers."""

from __future__ import annotations

import pytest

from studies.pipeline_mapping.model import (
    Connection,
    Mapping,
    MappingError,
    Module,
    Network,
    Node,
    Placement,
)
from studies.pipeline_mapping.pipeline import run_pipeline
from studies.pipeline_mapping.pipeline.shaper import Link
from studies.pipeline_mapping.pipeline.spec import node_cores, primed_edges, run_spec
from studies.pipeline_mapping.pipeline.work import Work

NET = (Network("slow", 10.0, 2.0),)


def mapping(cpus: tuple[int, ...], ring: bool) -> Mapping:
    nodes = tuple(Node(f"n{k}", c, ("slow",)) for k, c in enumerate(cpus))
    mods = tuple(Module(f"m{k}", 10, 0.5, (Placement(f"n{k % len(cpus)}"),)) for k in range(3))
    conns = [Connection("m0", ("m1",)), Connection("m1", ("m2",))]
    if ring:
        conns.append(Connection("m2", ("m0",)))
    return Mapping(NET, nodes, mods, tuple(conns))


def test_each_node_gets_its_own_cores():
    assert node_cores(mapping((1, 1), False), [0, 1]) == {"n0": [0], "n1": [1]}
    with pytest.raises(MappingError, match="3 CPUs in all; this machine gives 2 core"):
        node_cores(mapping((1, 2), False), [0, 1])
    assert node_cores(mapping((1, 2), False), [0, 1], share=True) == {"n0": [0], "n1": [1, 0]}


def test_a_cycle_gets_one_primed_edge_and_a_chain_none():
    assert primed_edges(mapping((1,), True)) == [2]  # m2 -> m0 closes the ring
    assert primed_edges(mapping((1,), False)) == []


def test_the_link_serialises_messages_and_adds_latency():
    link = Link(bandwidth=10.0, latency=2.0, volume=0.05)  # 5 ms per message, 2 ms latency
    assert link.visible_at(1.0) == pytest.approx(1.007)
    assert link.visible_at(1.001) == pytest.approx(1.012)  # waits for the first to finish
    assert Link(None, 0.0, 1.0).visible_at(3.0) == 3.0


def test_the_spec_carries_the_emulated_links():
    spec = run_spec(mapping((1, 1), False), 1.0, [0, 1])  # m0, m2 on n0; m1 on n1
    assert [i["node"] for i in spec["instances"]] == ["n0", "n1", "n0"]
    assert all(e["bandwidth"] == 10.0 and e["latency"] == 2.0 for e in spec["edges"])
    local = run_spec(mapping((2,), False), 1.0, [0, 1])
    assert all(e["bandwidth"] is None and e["latency"] == 0.0 for e in local["edges"])


def test_a_ring_runs_and_every_message_is_accounted_for():
    m = mapping((1,), True)
    got = run_pipeline(m, 1.0, cores=[0])
    assert set(got) == {"m0", "m1", "m2"}
    for r in got.values():
        assert r["iterations"] > 0
        for edge in r["inputs"].values():
            assert edge["received"] >= edge["consumed"]
    # one message circulates: nobody is more than one message behind
    assert all(e["backlog_max"] <= 1 for r in got.values() for e in r["inputs"].values())


def test_real_work_is_one_of_the_real_kinds():
    with pytest.raises(ValueError, match="real work is one of probe, render, composite"):
        Work("busy")
    with pytest.raises(ValueError, match="0x90"):
        Work("render", width=0)


def test_the_spec_gives_real_work_to_the_named_module_only():
    spec = run_spec(mapping((1,), False), 1.0, [0], work={"m1": Work("composite", width=8)})
    assert [i["work"] for i in spec["instances"]] == [
        None, {"kind": "composite", "scene": "dragon-small", "width": 8, "height": 90}, None]
    with pytest.raises(MappingError, match="unknown module"):
        run_spec(mapping((1,), False), 1.0, [0], work={"nope": Work("render")})


def test_real_renderers_run_as_pipeline_ranks():
    from raytracer.device.choice import one_device_per_runtime

    if not one_device_per_runtime():
        pytest.skip("no OpenCL device builds here")
    tiny = 0.01  # ms: the busy-work time the real work replaces
    m = Mapping(NET, (Node("n0", 1),), (Module("probe", tiny, 1.0, (Placement("n0"),)),
                                        Module("render", tiny, 1.0, (Placement("n0"),))),
                (Connection("probe", ("render",)),))
    work = {k: Work(k, width=64, height=36) for k in ("probe", "render")}
    got = run_pipeline(m, 1.0, cores=[0], work=work)
    for r in got.values():
        assert r["iterations"] > 0 and r["t_cexec_ms"] > 10 * tiny and r["cpu_ms"] > 0
    # the tracer renders once per probe message: it waits on its FIFO input
    assert got["render"]["inputs"]["0"]["consumed"] > 0
    assert got["render"]["inputs"]["0"]["consumed"] <= got["probe"]["sent"]["0"]
