"""``bench first-render``: the child's caches are all in the empty folder, a user's own ICD
folder stays, and a run with warm caches judges no goal (its quick mode runs in
tests/test_quick_modes.py)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.renderers.first_render import CACHE_ENV, VENDORS_ENV, fresh_environment, goals
from common.cache_folder import cache_dir


def test_the_fresh_environment_keeps_no_cache(monkeypatch, tmp_path):
    for name in CACHE_ENV:
        monkeypatch.setenv(name, "/somewhere")
    monkeypatch.setenv(VENDORS_ENV, str(cache_dir() / "opencl-vendors-abc"))
    env = fresh_environment(tmp_path)
    assert not set(CACHE_ENV) & set(env)
    assert VENDORS_ENV not in env  # the folder this process's runtime set-up made
    assert env["HOME"] == str(tmp_path) and Path(env["XDG_CACHE_HOME"]).parent == tmp_path
    monkeypatch.setenv(VENDORS_ENV, "/etc/my-vendors")
    assert fresh_environment(tmp_path)[VENDORS_ENV] == "/etc/my-vendors"  # the user's own


def test_goals_from_empty_caches_are_judged_and_warm_ones_are_not():
    first = {"first_line_s": 0.7, "total_s": 61.0}
    judged = goals(first, judged=True)
    assert judged["first_line_seconds"]["met"] and not judged["first_render_seconds"]["met"]
    warm = goals(first, judged=False)
    assert all(g["met"] is None and "empty" in g["not_judged"] for g in warm.values())
