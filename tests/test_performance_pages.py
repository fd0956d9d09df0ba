"""docs/performance.md is what `autotune report` makes of the committed results, and the
generator says what each result file holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.performance_pages import main, page, result_files

ROOT = Path(__file__).resolve().parents[1]


def test_the_committed_page_is_regenerated_identically():
    assert (ROOT / "docs" / "performance.md").read_text() == page(ROOT / "results"), (
        "docs/performance.md is stale: run `autotune report`")


def _result(folder: Path, name: str, figures: object) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(figures))


def test_a_page_names_each_machine_run_and_goal(tmp_path):
    results = tmp_path / "results"
    _result(results / "cpu-b", "bench_x.json", {
        "run": {"commit": "abc", "others_share": 0.25, "quiet": False},
        "goals": {"speed": {"value": 1.23456, "goal": ">= 1.5", "met": False,
                            "decides": False},
                  "size": {"value": None, "goal": "<= 3", "met": None}}})
    speed = {"cores": 2, "compute_ns_one_core": 2.1, "compute_ns_all_cores": 4.2,
             "copy_gbs_one_core": 8.0, "copy_gbs_all_cores": 5.0, "gather_ns_one_core": 3.0,
             "gather_ns_all_cores": 3.3, "compute_jitter": 0.052, "all_cores_slowdown": 2.0}
    _result(results / "cpu-a", "bench_y.json", {"run": {"commit": "def", "others_share": 0.0,
                                                        "quiet": True, "host_speed": speed,
                                                        "host_speed_at_end": {
                                                            **speed, "compute_jitter": 0.01}}})
    _result(results / "cpu-a" / "frames", "recorded.json", [1, 2, 3])  # data, not a result
    assert [p.name for p, _ in result_files(results)] == ["bench_y.json", "bench_x.json"]
    text = page(results)
    assert text.index("## cpu-a") < text.index("## cpu-b")
    assert "No goals block" in text and "recorded.json" not in text
    assert "others' share of the CPUs 25.0%; not quiet" in text
    assert "| speed | 1.235 | >= 1.5 | **not met** | no |" in text
    assert "Host speed: compute 2.1 ns/element on one core, 4.2 with all 2 busy" in text
    assert "random reads 3 / 3.3 ns; compute jitter 5.2% (at the end 1.0%)." in text
    assert "Host speed not recorded." in text  # bench_x's run predates the figure
    assert "| size | — | <= 3 | not measured | — |" in text
    assert "0 of 2 goals met" in text


def test_check_fails_on_a_stale_page_and_passes_after_writing(tmp_path):
    results, out = tmp_path / "results", tmp_path / "performance.md"
    _result(results / "cpu", "b.json", {"goals": {"g": {"value": 1, "goal": "<= 2",
                                                         "met": True}}})
    args = ["--results", str(results), "--out", str(out)]
    assert main([*args, "--check"]) == 1
    assert main(args) == 0 and main([*args, "--check"]) == 0
    _result(results / "cpu", "c.json", {"goals": {}})
    assert main([*args, "--check"]) == 1


def test_every_image_the_committed_page_links_is_committed():
    text = (ROOT / "docs" / "performance.md").read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert links, "the page links no plot"
    missing = [link for link in links if not (ROOT / "docs" / link).is_file()]
    assert not missing, f"run `autotune report`: {missing}"


def test_a_tracer_tuned_result_shows_its_controllers_and_plot(tmp_path):
    """Each scene of a ``bench tracer-tuned`` file: a row per controller and path, the oracle's,
    and the quality plot the report draws from the same file."""
    path = {"frames": 60, "mean_abs_error_top_on_target": 0.05, "p95_abs_error_top_on_target":
            0.125, "frames_over_budget": 3, "quality_reversals": 2, "tuner_share_of_frame": 0.021,
            "probed_frames": 9, "mean_frame_ms": 50.0, "p95_abs_error_vs_target": 0.125,
            "mean_tuner_ms": 1.05, "mean_probe_ms": 0.4,
            "image_quality": {"mean_ssim": 0.95, "mean_psnr_db": 40.0}}
    scene = {"scene": "dragon", "target_ms": 50.0, "noise_floor": {"mean_off_median": 0.02},
             "controllers": {"feedforward": {"orbit": path}, "fixed": {"orbit": path}},
             "oracle": {"orbit": {"mean_abs_error_vs_target": 0.03,
                                  "p95_abs_error_vs_target": 0.07,
                                  "quality_reversals_per_60_frames": 3.0}}}
    results, out = tmp_path / "results", tmp_path / "docs" / "performance.md"
    _result(results / "cpu", "tracer_tuned_x.json", {"goals": {}, "paper": [scene]})
    out.parent.mkdir()
    assert main(["--results", str(results), "--out", str(out)]) == 0
    text = out.read_text()
    assert ("| orbit | feedforward | 5.0 % | 12.5 % | 3 | 0.9500 | 40.0 | 2 | 2.1 % | 1.05 "
            "| 0.40 | 9 |") in text
    assert "| orbit | oracle | 3.0 % | 7.0 % | — | — | — | 3 | — | — | — | — |" in text
    image = "images/performance/cpu/tracer_tuned_x_dragon.png"
    assert f"({image})" in text and (out.parent / image).is_file()


def test_a_volume_tuned_result_shows_its_probe_policies(tmp_path):
    policy = {"mean_error": 0.072, "p95_error": 0.188, "tuner_share_of_frame": 0.017,
              "frames_probed": 17, "frames": 72}
    _result(tmp_path / "cpu", "volume_tuned_512.json",
            {"goals": {}, "probe_policies": {"on-change": policy}})
    assert "| on-change | 7.2 % | 18.8 % | 1.7 % | 17 of 72 |" in page(tmp_path)


def test_each_reproduced_seed_is_shown_beside_its_printed_figures():
    text = page(ROOT / "results")
    for heading in ("beside the auto-tuning paper", "Table V beside the kernel-model paper",
                    "Table VI beside the paper's", "beside the HemoCell study",
                    "beside the cluster study's", "The mapping paper's tables reproduced"):
        assert heading in text, heading
    # the printed figures are the seeds' own (Table VI's MMSC row, Sec. 5's fixed baseline)
    assert re.search(r"\| MMSC \| [0-9.]+ / 0\.008 \| [0-9.]+ / 0\.046 ", text)
    assert "| the paper | 2.1-6.3 % / 11.1-19.9 % | 0.2-1.1 % / 0.2-1.7 % | 10.5 % / 13.2 % |" \
        in text
