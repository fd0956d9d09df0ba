"""The compositing benchmark's goal holds only when every consecutive reference run holds it."""

from benchmarks.renderers.compositing import GOAL_RUNS, goals, run_summary


def reference(vs_memcpy: float, total_ms: float = 5.0) -> dict:
    """A reference run's figures as :func:`add_ratios` leaves them."""
    return {"size": 2048, "memcpy_GBps": 10.0, "vs_memcpy": {"binary_swap_gather": vs_memcpy},
            "binary_swap_gather": {"total_ms": total_ms, "stages_ms": [3.0],
                                   "transport": "shared"}}


def block(shares: list[float], times: list[float] | None = None) -> dict:
    refs = [reference(s, t) for s, t in zip(shares, times or [5.0] * len(shares), strict=True)]
    return goals({"reference": refs[0], "reference_runs": [run_summary(r) for r in refs]})


def test_one_slow_run_of_five_fails_the_goal():
    assert block([0.9] * GOAL_RUNS)["compositing_vs_memcpy"]["met"]
    slow = block([0.9, 0.9, 0.45, 0.9, 0.9])["compositing_vs_memcpy"]
    assert slow["value"] == 0.45 and not slow["met"]


def test_fewer_runs_than_the_goal_asks_are_not_judged_and_say_why():
    short = block([0.9] * (GOAL_RUNS - 1))["compositing_vs_memcpy"]
    assert short["runs"] == GOAL_RUNS - 1 and short["met"] is None
    assert f"judged on {GOAL_RUNS} consecutive runs" in short["not_judged"]


def test_the_time_goal_reads_the_slowest_run():
    times = block([0.9] * GOAL_RUNS, [5.0, 5.0, 41.0, 5.0, 5.0])["bswap_gather_2048_ms"]
    assert times["value"] == 41.0 and not times["met"]
