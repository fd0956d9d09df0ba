"""``autotune bench cluster-prediction``'s protocol without MPI (issue 20).

A test row's features come from a node run, never from the real run it predicts; accuracy
goals read only the rows with one rank per core; a node run times every brick of the
partition on one process."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.studies.cluster_prediction import command
from benchmarks.studies.cluster_prediction.command import model_meta
from benchmarks.studies.cluster_prediction.emulation_runs import (
    emulation_plan,
    histograms,
    is_training_histogram,
)
from benchmarks.studies.cluster_prediction.goals import diagnostics, goals
from benchmarks.studies.cluster_prediction.model_training import (
    faster_node_split,
    fastest_generated,
    form_scores,
    holds_in_both,
)
from benchmarks.studies.cluster_prediction.mpi_runs import CURRENT_STEP, FASTER_STEP, real_runs
from benchmarks.studies.cluster_prediction.scoring import (
    LeakError,
    by_cores,
    feature_fidelity,
    held_out_row,
    held_out_rows,
)
from common.atomic_files import write_json
from raytracer.volume.distributed import load_everywhere, seed_orbit
from studies.cluster_prediction.perf_histogram import PathHistogram
from studies.cluster_prediction.training_data import run_node

CFG = {"volume": "synthetic", "sizes": [64], "real_ranks": [1, 2, 4], "emu_ranks": [1, 2, 4],
       "scales": [0.7]}


def synthetic_runs(seed: int) -> tuple[dict, dict]:
    """Real runs (render times around 10 ms) and node runs (around 50 ms) of both nodes:
    whichever feeds a histogram shows in its mean."""
    rng = np.random.default_rng(seed)
    real, node = {}, {}
    for step in (CURRENT_STEP, FASTER_STEP):
        for ranks in CFG["real_ranks"]:
            key = f"s{step:g}:64:{ranks}:f6"
            real[key] = {"key": key, "step": step, "size": 64, "ranks": ranks,
                         "render_seconds": rng.uniform(0.009, 0.011, (6, ranks)).tolist(),
                         "frame_seconds": rng.uniform(0.012, 0.014, 6).tolist()}
            nkey = "node:" + key
            node[nkey] = {"key": nkey, "step": step, "size": 64, "ranks": ranks,
                          "render_seconds": rng.uniform(0.045, 0.055, (6, ranks)).tolist()}
    return real, node


def test_upgrade_rows_take_features_from_node_runs_and_targets_from_real_runs(tmp_path):
    real, node = synthetic_runs(0)
    hists, _ = histograms(CFG, real, node, tmp_path)
    rows = held_out_rows(real, hists, FASTER_STEP, "nt")
    assert len(rows) == len(CFG["real_ranks"])
    for row in rows:
        target = real[row["target_run"]]
        source = node[row["feature_run"]]
        assert target["step"] == source["step"] == FASTER_STEP
        assert (source["size"], source["ranks"]) == (target["size"], target["ranks"])
        assert row["features"] == pytest.approx(
            PathHistogram.of(source["render_seconds"]).overall.features())
        assert row["features"][1] > 0.04  # the node run's times, not the real run's (~10 ms)
        assert row["frame_seconds"] == pytest.approx(np.mean(target["frame_seconds"]))


def test_feature_fidelity_sets_each_node_run_against_the_real_run_it_predicts(tmp_path):
    """Node runs ~50 ms against real runs ~10 ms: about 5x off, on the one-rank-per-core rows
    only, the worst row named."""
    real, node = synthetic_runs(2)
    hists, _ = histograms(CFG, real, node, tmp_path)
    rows = held_out_rows(real, hists, FASTER_STEP, "nt")
    got = feature_fidelity(rows, cores=2)
    want = {r["target_run"]: r["features"][1] / np.mean(real[r["target_run"]]["render_seconds"])
            for r in rows if r["ranks"] <= 2}
    assert got["node_over_real_render"] == pytest.approx(want)
    assert min(want.values()) > 3.5 and max(want.values()) < 6.5
    assert got["mean_abs_off"] == pytest.approx(np.mean([abs(v - 1) for v in want.values()]))
    assert got["worst"]["node_over_real_render"] == pytest.approx(max(want.values()))


def test_training_rows_emulate_the_current_nodes_node_runs(tmp_path):
    """Training histograms are measured as the test rows' features are (node runs, ~50 ms
    here), never the real runs' (~10 ms), and no faster-node histogram trains."""
    real, node = synthetic_runs(4)
    cfg = {**CFG, "frames": 6, "slow_sources": 2}
    hists, use = histograms(cfg, real, node, tmp_path)
    training = {c.hist for c in emulation_plan(cfg, use) if is_training_histogram(c.hist)}
    assert training == set(use.values())
    assert {h for h in training if not h.startswith("g")} == {"nc64r1", "nc64r2", "nc64r4"}
    for hist_id in training:
        assert hists[hist_id][0].overall.mean > 0.03
        base = hist_id.split(":")[1] if hist_id.startswith("g") else hist_id
        assert node[hists[base][0].meta["run"]]["step"] == CURRENT_STEP
    assert not any(is_training_histogram(h) for h in ("m64r1", "nt64r2", "g0.7:64r1:1"))


def test_a_half_step_phase_takes_the_views_between_the_seeds_views():
    base, shifted = seed_orbit(10.0, 8), seed_orbit(10.0, 8, phase=0.5)
    angle = [np.arctan2(c.eye[0], c.eye[2]) for c in base + shifted]
    assert np.allclose(np.diff(np.unwrap(angle[:8])), np.pi / 2)
    assert np.allclose(np.unwrap(angle[8:]) - np.unwrap(angle[:8]), np.pi / 4)


def test_the_predicted_runs_own_times_do_not_move_its_features(tmp_path):
    real, node = synthetic_runs(1)
    before = held_out_rows(real, histograms(CFG, real, node, tmp_path)[0], FASTER_STEP, "nt")
    for run in real.values():
        run["render_seconds"] = (np.asarray(run["render_seconds"]) * 3).tolist()
    after = held_out_rows(real, histograms(CFG, real, node, tmp_path)[0], FASTER_STEP, "nt")
    assert [r["features"] for r in before] == [r["features"] for r in after]


def test_no_histogram_of_a_faster_node_real_run_exists(tmp_path):
    real, node = synthetic_runs(2)
    hists, _ = histograms(CFG, real, node, tmp_path)
    faster = {k for k, r in real.items() if r["step"] == FASTER_STEP}
    assert not faster & {h.meta.get("run") for h, _ in hists.values()}


def test_a_row_whose_features_come_from_its_own_run_is_refused():
    real, _ = synthetic_runs(3)
    run = next(iter(real.values()))
    own = PathHistogram.of(run["render_seconds"], {"run": run["key"]})
    with pytest.raises(LeakError, match=run["key"]):
        held_out_row(run, own)


def test_rows_split_by_cores():
    rows = [{"ranks": r} for r in (1, 2, 3, 4, 2)]
    got = by_cores(rows, 2)
    assert got["one_rank_per_core"].tolist() == [0, 1, 4]
    assert got["oversubscribed"].tolist() == [2, 3]


def fig(good: str) -> dict:
    """Experiment figures whose ``good`` part scores R² 0.99 and the other part 0.5."""
    def part(name: str) -> dict:
        r2 = 0.99 if name == good else 0.5
        return {k: {"r2": r2, "mean_signed_rel_error": 0.0}
                for k in ("nn_term", "nn_analytic", "analytic_term", "nn_term_swapped",
                          "nn_analytic_swapped", "nn_no_term (seed)")}
    split = {p: part(p) for p in ("one_rank_per_core", "oversubscribed")}
    return {"upgrade": {"scores": split}, "emulation_vs_real": {"scores": {}},
            "faster_network": {"scores": {"faster_node": split, "current_node": split}}}


@pytest.mark.parametrize("good", ["one_rank_per_core", "oversubscribed"])
def test_accuracy_goals_read_only_the_one_rank_per_core_rows(good):
    got = goals(fig(good))
    assert set(got) == {"upgrade_r2", "faster_network_r2"}  # the cluster model's, no variant
    for name in ("upgrade_r2", "faster_network_r2"):
        assert got[name]["met"] is (good == "one_rank_per_core"), name
    beside = diagnostics(fig(good))
    for name in ("upgrade_r2_nn_analytic", "faster_network_r2_analytic_term"):
        assert beside[name]["met"] is (good == "one_rank_per_core"), name


def test_the_goals_score_the_form_the_run_chose_and_report_the_other_beside():
    """The chosen form (here the MLP on E[max]) decides the goals; the study's form, scoring
    0.5, is a diagnostic; a result from before the choice is judged on the study's form."""
    figures = fig("one_rank_per_core")
    for part in figures["upgrade"]["scores"].values():
        part["nn_term"]["r2"] = 0.5
    for part in figures["faster_network"]["scores"]["faster_node"].values():
        part["nn_term_swapped"]["r2"] = 0.5
    assert not any(v["met"] for v in goals(figures).values())  # no choice: the study's form
    figures["model_form"] = {"form": "expected_max", "model": "nn_analytic"}
    got, beside = goals(figures), diagnostics(figures)
    assert all(v["met"] for v in got.values())
    assert "E[max" in got["upgrade_r2"]["what"] and "E[max" in got["faster_network_r2"]["what"]
    assert "blind" not in got["upgrade_r2"]["what"]
    figures["model_form"]["blind"] = False  # a machine whose test rows the rule was written on
    assert all("not a blind result" in v["what"] for v in goals(figures).values())
    assert beside["upgrade_r2_nn_term"]["met"] is False
    assert beside["faster_network_r2_nn_term_swapped"]["met"] is False
    assert "upgrade_r2_nn_analytic" not in beside


def test_the_form_is_chosen_on_generated_rows_and_must_hold_in_both_shapes():
    rows = [{"hist": h} for h in ("nc64r1", "g0.7:nc64r1:2", "g0.5:nc64r1:2", "g0.5:nc64r2:4")]
    kept, held = faster_node_split({"scales": [0.7, 0.5]}, rows)
    assert [r["hist"] for r in held] == ["g0.5:nc64r1:2", "g0.5:nc64r2:4"]
    assert [r["hist"] for r in kept] == ["nc64r1", "g0.7:nc64r1:2"]
    assert fastest_generated(rows, (0.7, 0.5)).tolist() == [False, False, True, True]
    assert fastest_generated(kept, (0.7,)).tolist() == [False, True]  # the next fastest
    uneven = {"faster_node": 0.01, "faster_network": 0.40}
    even = {"faster_node": 0.05, "faster_network": 0.06}
    assert holds_in_both({"term": uneven, "expected_max": even}) == "expected_max"
    assert holds_in_both({"term": even, "expected_max": uneven}) == "term"


def test_the_form_is_scored_on_the_rows_with_one_rank_per_core():
    rows = [{"ranks": r, "frame_seconds": 0.01} for r in (1, 2, 4, 32)]
    shapes = {"faster_node": ({"term": np.full(4, 0.0105),
                               "expected_max": np.array([0.0101, 0.0101, 0.02, 0.05])}, rows),
              "faster_network": ({"term": np.full(4, 0.0106),
                                  "expected_max": np.array([0.0102, 0.0099, 0.03, 0.04])}, rows)}
    scores = form_scores(shapes, cores=2)
    assert scores["term"]["faster_node"] == pytest.approx(0.05)
    assert scores["expected_max"]["faster_network"] == pytest.approx(0.015)
    assert holds_in_both(scores) == "expected_max"  # bad only where ranks share a core
    assert holds_in_both(form_scores(shapes, cores=32)) == "term"
    with pytest.raises(ValueError, match="at most 0 ranks"):
        form_scores(shapes, cores=0)


def test_a_saved_model_says_how_many_cores_its_emulation_rows_had():
    figures = {"model_form": {"form": "expected_max"}, "config": {"cores": 2, "volume": "bonsai"},
               "machine": {"cpu": "AMD EPYC (family 25, model 1), 2 CPUs",
                           "date": "2026-11-30T07:00:00+00:00"}}
    meta = model_meta(figures)
    assert meta["cores"] == 2 and meta["form"] == "expected_max" and meta["volume"] == "bonsai"
    assert meta["date"] == figures["machine"]["date"]
    assert meta["machine"] == figures["machine"]["cpu"]


def test_a_full_run_saves_its_figures_then_the_model_with_that_meta(monkeypatch, tmp_path):
    written = []
    monkeypatch.setattr(command, "save_result", lambda name, fig: written.append(name))
    monkeypatch.setattr(command, "machine_folder", lambda: tmp_path)
    monkeypatch.setattr(command, "write_model", lambda path, m: written.append(path))
    figures = {"model_form": {"form": "term"}, "config": {"cores": 2, "volume": "bonsai"},
               "machine": {"cpu": "some CPU", "date": "2026-11-30T07:00:00+00:00"}}
    model = SimpleNamespace(meta={"rows": 3})
    command.save(figures, {"models": {"nn_term": model}, "shipped": "nn_term"}, quick=False)
    assert written == [command.RESULTS_NAME, tmp_path / command.DATA_NAME / command.MODEL_NAME]
    assert model.meta == {"rows": 3, **model_meta(figures)}
    written.clear()
    command.save(figures, {}, quick=True)  # a quick run saves no model
    assert written == [command.RESULTS_QUICK_NAME]


def test_a_node_run_times_every_brick_of_the_partition_in_one_process():
    volume, tf = load_everywhere("bonsai")
    cams = seed_orbit(volume.radius, 3, phase=0.5)
    got = run_node(volume, tf, 3, [32], [1.0, 3.0], cams)
    assert set(got) == {(1.0, 32), (3.0, 32)}
    for times in got.values():
        assert times.shape == (3, 3)
        assert np.all(times > 0)


def test_a_quick_run_does_not_judge_r2_on_its_few_rows_and_says_so():
    got = goals(fig("one_rank_per_core"), quick=True)
    assert got and all(v["met"] is None and "too few to judge" in v["not_judged"]
                       for v in got.values())
    beside = diagnostics(fig("one_rank_per_core"), quick=True)
    assert all(v["met"] is None for k, v in beside.items() if "_r2_" in k)
    assert beside["faster_network_bias"]["met"] in (True, False)  # judged on any run


def test_a_real_run_is_each_frames_median_over_its_passes(tmp_path):
    """Three passes of each run in the data folder (none left to measure): the first under
    the run's own key, the others ``:r1``, ``:r2``; a pass that ran slow on one frame does not
    move that frame, and each pass's mean is kept beside it."""
    cfg = {"volume": "synthetic", "sizes": [64], "real_ranks": [1, 2], "frames": 3,
           "real_repeats": 3}
    stored, frames = {}, {}
    for step in (CURRENT_STEP, FASTER_STEP):
        for ranks in cfg["real_ranks"]:
            key = f"s{step:g}:64:{ranks}:f3"
            frames[key] = [[0.010, 0.011, 0.012], [0.030, 0.011, 0.013], [0.011, 0.012, 0.011]]
            for i, times in enumerate(frames[key]):
                name = key + (f":r{i}" if i else "")
                stored[name] = {"key": name, "step": step, "size": 64, "ranks": ranks,
                                "frame_seconds": times, "composite_seconds": times,
                                "render_seconds": [[t] * ranks for t in times],
                                "load_avg": 0.5 + i}
    write_json(tmp_path / "real_runs.json", stored)
    got = real_runs(cfg, tmp_path)
    assert sorted(got) == sorted(frames)
    for key, run in got.items():
        assert run["key"] == key and run["repeats"] == 3 and run["load_avg"] == 2.5
        assert run["frame_seconds"] == pytest.approx([0.011, 0.011, 0.012])
        assert np.allclose(run["render_seconds"],
                           [[t] * run["ranks"] for t in (0.011, 0.011, 0.012)])
        assert run["pass_frame_ms"] == pytest.approx([1e3 * np.mean(f) for f in frames[key]])
