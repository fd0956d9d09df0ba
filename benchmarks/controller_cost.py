"""Cost of the feed-forward controller per frame, against one vectorized predictor call.

The space is the ray tracer's (AO rays 0..64, AO radius in 16 levels, shadows, Phong:
4,160 settings) but the predictor is a synthetic numpy formula, so this measures the
controller's own overhead (grid search, hysteresis, feedback, bookkeeping), not a model.
The design budget is 1 ms per frame.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from autotune import BoolKnob, FloatKnob, IntKnob, KnobSpace, Tuner
from autotune.app.report import emit, summary_stats

BUDGET_US = 1000.0


def make_space() -> KnobSpace:
    """The ray tracer's knob space."""
    return KnobSpace(
        [
            IntKnob("ao_rays", 0, 64),
            FloatKnob("ao_radius", 0.25, 4.0, levels=16),
            BoolKnob("shadows"),
            BoolKnob("phong"),
        ]
    )


class SyntheticModel:
    """Vectorized cost model whose workload drifts like a camera flying through a scene."""

    def __init__(self) -> None:
        self.workload = 1.0

    def __call__(self, c: dict[str, np.ndarray]) -> np.ndarray:
        ao = c["ao_rays"] * (0.00012 + 0.00002 * c["ao_radius"])
        return self.workload * (0.004 + ao + 0.005 * c["shadows"] + 0.001 * c["phong"])


def time_choose(controller: str, vectorized: bool, frames: int) -> dict[str, float]:
    """Closed loop over ``frames`` frames; times only ``Tuner.choose()``."""
    model = SyntheticModel()
    rng = np.random.default_rng(0)
    predictor = (
        model if vectorized else (lambda k: float(model({n: np.array(v) for n, v in k.items()})))
    )
    tuner = Tuner(make_space(), predictor, 1 / 60, controller=controller, vectorized=vectorized)
    samples, evaluations = [], []
    for i in range(frames + 20):
        model.workload = 1.0 + 0.5 * np.sin(i / 40.0)
        started = time.perf_counter()
        decision = tuner.choose()
        elapsed = time.perf_counter() - started
        if i >= 20:  # warm-up: grid construction, caches
            samples.append(elapsed)
            evaluations.append(decision.evaluations)
        true_time = model({k: np.array([v]) for k, v in decision.knobs.items()})[0]
        tuner.observe(float(true_time) * 1.2 * (1 + rng.uniform(-0.03, 0.03)))
    return {**summary_stats(samples, ("mean", "p95"), scale=1e6, suffix="_us"),
            "evaluations_per_frame": float(np.mean(evaluations))}


def time_reference(repeats: int) -> dict[str, float]:
    """One vectorized predictor call over the whole grid: the floor any grid search pays."""
    space, model = make_space(), SyntheticModel()
    grid = space.grid()
    samples = []
    for _ in range(repeats + 20):
        started = time.perf_counter()
        model(grid)
        samples.append(time.perf_counter() - started)
    return {**summary_stats(samples[20:], ("mean", "p95"), scale=1e6, suffix="_us"),
            "candidates": space.size}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer frames (a smoke run)")
    parser.add_argument("--json", action="store_true", help="print figures as JSON")
    args = parser.parse_args(argv)
    frames = 300 if args.quick else 3000

    reference = time_reference(frames)
    feedforward = time_choose("feedforward", vectorized=True, frames=frames)
    scalar = time_choose("feedforward", vectorized=False, frames=max(50, frames // 10))
    pi = time_choose("pi", vectorized=True, frames=frames)
    figures = {
        "frames": frames,
        "budget_us": BUDGET_US,
        "reference_predictor_call_over_grid": reference,
        "feedforward_vectorized_grid": feedforward,
        "feedforward_scalar_bisection": scalar,
        "pi_no_model": pi,
        "feedforward_over_reference_mean": feedforward["mean_us"] / reference["mean_us"],
        "feedforward_p95_within_budget": feedforward["p95_us"] <= BUDGET_US,
    }
    emit(figures, args.json, "Controller cost per choose()")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
