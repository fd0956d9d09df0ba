"""A result names the commit that ran; saved results and regenerated pages do not make it dirty."""

import subprocess
from pathlib import Path

import pytest

from benchmarks.harness import run_record


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


@pytest.fixture()
def checkout(tmp_path, monkeypatch):
    for name in ("code.py", "results/m/r.json", "docs/performance.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("0\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "first")
    monkeypatch.setattr(run_record, "CHECKOUT", tmp_path)
    monkeypatch.delenv(run_record.COMMIT_ENV, raising=False)
    return tmp_path


def test_a_saved_result_or_a_regenerated_page_is_not_a_change_of_what_ran(checkout):
    clean = run_record.checkout_commit()
    assert len(clean) == 12 and not clean.endswith("-dirty")
    (checkout / "results/m/r.json").write_text("1\n")
    (checkout / "docs/performance.md").write_text("1\n")
    assert run_record.checkout_commit() == clean


def test_a_changed_source_file_marks_the_commit_dirty(checkout):
    clean = run_record.checkout_commit()
    (checkout / "code.py").write_text("1\n")
    assert run_record.checkout_commit() == clean + "-dirty"


def test_a_goal_decides_only_in_a_quiet_run_of_its_protocol():
    def marked(quiet: bool, off: dict[str, str]) -> dict:
        goals = {"g": {"value": 0.1, "met": True}}
        return run_record.mark_goals(goals, {"quiet": quiet, "others_share": 0.3}, off)["g"]

    assert marked(True, {})["decides"] is True and "why_not" not in marked(True, {})
    assert marked(True, {"ranks-4": "4 ranks on 2 cores"}) == {
        "value": 0.1, "met": True, "decides": False,
        "why_not": "not the goals' protocol: 4 ranks on 2 cores"}
    both = marked(False, run_record.quick_run(True))
    assert both["decides"] is False
    assert both["why_not"].startswith("other processes used 30% of the CPUs")
    assert both["why_not"].endswith("; not the goals' protocol: --quick")
    unjudged = run_record.mark_goals({"g": {"value": 0.6, "met": None, "not_judged": "1 run"}},
                                     {"quiet": True, "others_share": 0.0})["g"]
    assert unjudged["decides"] is False and unjudged["why_not"] == "1 run"
    unmeasured = run_record.mark_goals({"g": {"value": None, "met": None}},
                                       {"quiet": True, "others_share": 0.0})["g"]
    assert unmeasured["decides"] is False and "nothing measured" in unmeasured["why_not"]


def test_options_set_away_from_their_defaults_name_the_run_and_say_how():
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--scene", action="append")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--target-ms", type=float)
    p.add_argument("--json", action="store_true")
    names = ("scene", "quick", "target_ms")
    assert run_record.changed_options(p, p.parse_args(["--json"]), names) == {}
    args = p.parse_args(["--target-ms", "12.5", "--scene", "dragon", "--scene", "my mesh/a.obj",
                         "--quick"])
    assert run_record.changed_options(p, args, names) == {
        "scene-dragon+my-mesh-a.obj": "--scene dragon,my mesh/a.obj", "quick": "--quick",
        "target_ms-12.5": "--target-ms 12.5"}
