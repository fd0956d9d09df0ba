"""``autotune bench pipeline-mapping`` without running pipelines.

Its cases fit this machine, its table part reproduces the mapping paper (Jubertie, Melin,
"Performance Prediction for Mappings of Distributed Applications on PC Clusters"), and its
goals say what the figures say."""

from __future__ import annotations

from benchmarks.studies import pipeline_mapping
from benchmarks.studies.pipeline_mapping import cases, goals, real_cases, run_case, tables_part
from studies.pipeline_mapping.model import solve


def test_at_least_twelve_cases_that_fit_two_cores():
    todo = cases()
    steady = [m for _, m, _, _ in todo
              if not (solve(m).overflows or solve(m).oscillating)]
    assert len(steady) >= 12
    for name, m, share, _ in todo:
        assert share or sum(n.cpus for n in m.nodes) <= 2, name


def test_real_renderer_cases_do_real_work_on_real_modules():
    real = [(name, m, work) for name, m, _, work in cases() if work]
    assert len(real) >= 2
    assert any(w.kind == "render" for _, _, work in real for w in work.values())
    for name, m, work in real:
        assert name.startswith("real: ")
        assert set(work) <= {mod.name for mod in m.modules}, name
        steady = solve(m, "shared")
        assert not (steady.overflows or steady.oscillating), name


def test_the_tables_part_reproduces_the_seed():
    assert all(t["reproduced"] for t in tables_part())


def case(error: float, backlog: float, overflow: bool = False, osc: bool = False,
         spread: float = 0.0, real: bool = False) -> dict:
    return {"mean_error": None if overflow or osc else error,
            "real_work": {"render": "render"} if real else {},
            "mean_error_shared": None if overflow or osc else error / 2,
            "predicted": {"overflows": ["a->b"] if overflow else [], "network_overloads": [],
                          "oscillating": ["a"] if osc else []},
            "measured_backlog_share": {"a->b": backlog},
            "modules": {"a": {"window_spread": spread}}}


def test_goals_follow_the_figures():
    figures = {"tables": tables_part(),
               "cases": [case(0.08, 0.0) for _ in range(11)] + [case(0.08, 0.0, real=True)]
               + [case(0, 0.5, overflow=True), case(0, 0.0, osc=True, spread=0.3)],
               "search": {"candidates": [{}] * 8, "measured_best_ms": 40.0,
                          "predicted_best_measured_ms": 50.0,
                          "shared_best_measured_ms": 41.0}}
    g = goals(figures)
    assert g["tables_I_IV_VI"]["met"] and g["table_V_algorithm"]["met"]
    assert g["mean_iteration_time_error"]["met"] and g["mean_iteration_time_error_shared"]["met"]
    assert g["overflows_predicted_and_seen"]["met"] and g["oscillations_predicted_and_seen"]["met"]
    assert not g["search_finds_measured_best"]["met"]
    assert g["search_finds_measured_best_shared"]["met"]
    assert "1 of them pipelines of this project's real renderers" in \
        g["mean_iteration_time_error"]["what"]
    figures["cases"][11] = case(0.08, 0.0)  # twelve mappings, none of the real renderers
    assert not goals(figures)["mean_iteration_time_error_shared"]["met"]
    figures["cases"][0] = case(0.08, 0.5)  # a backlog nobody predicted
    figures["cases"][1] = case(2.0, 0.0)
    g = goals(figures)
    assert not g["overflows_predicted_and_seen"]["met"]
    assert not g["mean_iteration_time_error"]["met"]


def test_a_real_case_is_predicted_from_alone_figures_not_from_its_own_run(monkeypatch):
    name, m, work = real_cases()[0]  # probe -> tracer -> viewer
    alone = {w: (20.0, 1.0) if w.kind == "probe" else (8.0, 1.0) for w in work.values()}
    ran = {}

    def fake_run(mapping, seconds, share=False, work=None):
        ran.update(work=work, times={mod.name: mod.t_exec for mod in mapping.modules})
        return {i.name: {"t_it_ms": 999.0, "t_cexec_ms": 999.0, "cpu_ms": 1.0,
                         "windows_ms": [], "inputs": {}} for i in mapping.instances()}

    monkeypatch.setattr(pipeline_mapping, "run_pipeline", fake_run)
    got = run_case(name, m, False, 1.0, work, alone)
    assert ran["work"] == work and ran["times"] == {"probe": 20.0, "render": 8.0, "viewer": 4.0}
    # the tracer waits for the probe, which shares its core with the viewer: never 999
    assert got["modules"]["render"]["shared_t_it_ms"] == got["modules"]["probe"]["shared_t_it_ms"]
    assert 20.0 < got["modules"]["probe"]["shared_t_it_ms"] < 40.0
    assert got["real_work"] == {"probe": "probe", "render": "render"}
