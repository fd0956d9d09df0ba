"""Every benchmark's quick mode runs and its goals block holds no wrong figure (issue 49): each
goal's value is a finite number (or None where nothing was measured), and a goal that is not
judged says why. Each runs as the user runs it, ``autotune bench NAME --quick --json`` in its
own process. ``kernel-models``, ``gpu`` and ``embed`` run their quick modes in their own tests;
``replay-record`` records frames and has no goals. Left out for its cost: ``cluster-prediction``
(about 2 minutes quick on 2 cores; tests/test_cluster_bench.py holds its quick goals)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICK = ("compositing", "controller-cost", "first-render", "probe-cost", "tracer-tuned",
         "tracer-model", "throughput", "volume-throughput", "volume-tuned", "pipeline-mapping")


@pytest.mark.parametrize("name", QUICK)
def test_a_quick_run_prints_goals_that_are_numbers_or_say_why_not(name):
    done = subprocess.run([sys.executable, "-m", "autotune_app.cli", "bench", name, "--quick",
                           "--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    for goal_name, goal in figures.get("goals", {}).items():
        value, met = goal.get("value"), goal.get("met")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert math.isfinite(value), f"{name}: {goal_name} = {value}"
        assert met in (True, False, None), f"{name}: {goal_name} met = {met!r}"
        if met is None and value is not None:
            assert goal.get("not_judged") or goal.get("why_not"), \
                f"{name}: {goal_name} is neither met nor not met, and does not say why"
