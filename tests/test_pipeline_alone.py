"""Real modules measured alone feed the mapping model (issue 22, Jubertie & Melin's method): alone
figures from what the runtime measured, and a prediction made from them only."""

from __future__ import annotations

import pytest

from studies.pipeline_mapping.model import (
    Connection,
    Mapping,
    Module,
    Network,
    Node,
    Placement,
    solve,
)
from studies.pipeline_mapping.pipeline.alone import alone_figures, alone_mapping, with_measured


def test_alone_figures_are_compute_wall_time_and_cpu_share():
    assert alone_figures({"name": "r", "t_cexec_ms": 10.0, "cpu_ms": 8.0}) == (10.0, 0.8)
    assert alone_figures({"name": "r", "t_cexec_ms": 10.0, "cpu_ms": 10.3})[1] == 1.0
    with pytest.raises(ValueError, match="'r' ran no timed iteration alone"):
        alone_figures({"name": "r", "t_cexec_ms": None, "cpu_ms": None})


def test_the_alone_mapping_is_one_module_on_one_cpu():
    m = alone_mapping("render")
    m.validate()
    assert [(i.name, i.node) for i in m.instances()] == [("render", "alone")]
    assert sum(n.cpus for n in m.nodes) == 1


def pipeline() -> Mapping:
    """probe (a) -> FIFO -> render (b), nominal times that the alone figures replace."""
    nodes = (Node("a", 1, ("lan",)), Node("b", 1, ("lan",)))
    return Mapping((Network("lan", 1000.0),), nodes, (
        Module("probe", 1.0, 1.0, (Placement("a"),)),
        Module("render", 1.0, 1.0, (Placement("b"),))), (Connection("probe", ("render",)),))


def test_the_prediction_comes_from_the_alone_figures():
    measured = with_measured(pipeline(), {"probe": (20.0, 0.9), "render": (12.0, 1.0)})
    assert {m.name: (m.t_exec, m.load) for m in measured.modules} == {
        "probe": (20.0, 0.9), "render": (12.0, 1.0)}
    s = solve(measured, "shared")
    assert s.modules["render"].t_it == pytest.approx(20.0)  # waits for the slower probe
    slow_render = solve(with_measured(pipeline(), {"probe": (20.0, 0.9), "render": (30.0, 1.0)}))
    assert [(o.producer, o.consumer) for o in slow_render.overflows] == [("probe", "render")]


def test_alone_figures_for_an_unknown_module_are_refused():
    with pytest.raises(ValueError, match="unknown module"):
        with_measured(pipeline(), {"viewer": (4.0, 0.5)})
