"""docs/performance.md is what `autotune report` makes of the committed results, and the
generator says what each result file holds."""

from __future__ import annotations

import json
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
    _result(results / "cpu-a", "bench_y.json", {"run": {"commit": "def", "others_share": 0.0,
                                                        "quiet": True}})
    _result(results / "cpu-a" / "frames", "recorded.json", [1, 2, 3])  # data, not a result
    assert [p.name for p, _ in result_files(results)] == ["bench_y.json", "bench_x.json"]
    text = page(results)
    assert text.index("## cpu-a") < text.index("## cpu-b")
    assert "No goals block" in text and "recorded.json" not in text
    assert "others' share of the CPUs 25.0%; not quiet" in text
    assert "| speed | 1.235 | >= 1.5 | **not met** | no |" in text
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
