"""The host-speed figure each run records: measured figures that tell a slow host of a CPU
label from a fast one, or one line saying why there are none."""

from __future__ import annotations

import math

import pytest

from benchmarks.harness import host_speed
from benchmarks.harness.host_speed import measure_host_speed


def test_the_figures_are_positive_and_the_slowdown_is_their_ratio():
    speed = measure_host_speed()
    assert speed["cores"] >= 1
    for key in ("compute_ns_one_core", "compute_ns_all_cores", "copy_gbs_one_core",
                "copy_gbs_all_cores", "gather_ns_one_core", "gather_ns_all_cores"):
        assert math.isfinite(speed[key]) and speed[key] > 0, key
    assert 0 <= speed["compute_jitter"] < 1
    ratios = (speed["compute_ns_all_cores"] / speed["compute_ns_one_core"],
              speed["copy_gbs_one_core"] / speed["copy_gbs_all_cores"],
              speed["gather_ns_all_cores"] / speed["gather_ns_one_core"])
    assert speed["all_cores_slowdown"] == pytest.approx(max(ratios), rel=0.01)


def test_a_worker_that_cannot_start_leaves_one_line_not_a_crash(monkeypatch):
    monkeypatch.setattr(host_speed.sys, "executable", "/nonexistent/python")
    speed = measure_host_speed()
    assert list(speed) == ["not_measured"] and "nonexistent" in speed["not_measured"]
