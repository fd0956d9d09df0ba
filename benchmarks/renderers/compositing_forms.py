"""Seed 004's communication ratio as a factor, against the volume model's added term.

The HemoCell study (seed 004, Sect. 4.4) multiplies a process's communication term by its
communication ratio (neighbours / most neighbours). The volume model's compositing stage adds
the ratio as a latency share instead: ``α·ratio + β·bytes + γ·pixels``
(:class:`models.volume_cost.StageModel`). Under binary swap on a power of two every stage has
one partner and the two forms are one model; the compositing benchmark's other schedules
(2-3 swap, radix-k, folds of a non-power of two) give stages of uneven partner counts, where
they differ. Both are fitted here on the benchmark's configurations (algorithm x rank count,
one transport at a time: the sums over stages of each stage's most partners, bytes and blended
pixels of any rank, against the stages' median seconds) and scored leaving one configuration
out. Above this machine's cores the configurations share them, so this compares the forms on
the schedules' work under contention, not on a cluster's network.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.harness.page_cells import percent
from models.volume_cost import StageModel

#: the forms compared: each maps per-stage (ratio, bytes, pixels) to the stage model's three
#: columns summed over the stages
FORMS = {
    "added": lambda ratio, nbytes, pixels: (ratio.sum(), nbytes.sum(), pixels.sum()),
    "factor": lambda ratio, nbytes, pixels: (ratio.sum(), (ratio * nbytes).sum(),
                                             pixels.sum()),
}


def stage_columns(config: dict[str, Any], form: str) -> tuple[float, float, float]:
    """One configuration's columns under ``form`` (its ``stage_work_max`` rows: partners,
    bytes, pixels per stage; the ratio is partners over the schedule's most)."""
    work = np.asarray(config["stage_work_max"], np.float64).reshape(-1, 3)
    ratio = work[:, 0] / max(float(work[:, 0].max(initial=0.0)), 1.0)
    return FORMS[form](ratio, work[:, 1], work[:, 2])


def leave_one_out(columns: np.ndarray, seconds: np.ndarray) -> float:
    """Mean relative error of each row predicted by a stage model fitted on the others."""
    errors = []
    for i in range(len(seconds)):
        keep = np.arange(len(seconds)) != i
        model = StageModel.fit(*columns[keep].T, seconds[keep])
        errors.append(abs(float(model.predict(*columns[i])) - seconds[i]) / seconds[i])
    return float(np.mean(errors))


def communication_ratio_forms(algorithms: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Both forms per transport over ``algorithms`` (rank count -> name -> run summary, as
    the benchmark's ``algorithms_1024``): leave-one-out and in-sample mean relative errors,
    and how many configurations have stages of uneven partner counts."""
    by_transport: dict[str, list[dict[str, Any]]] = {}
    for runs in algorithms.values():
        for name, config in runs.items():
            if "stage_work_max" in config and config["stages_ms"]:
                transport = "messages" if name.endswith("(messages)") else "default"
                by_transport.setdefault(transport, []).append(config)
    out: dict[str, Any] = {}
    for transport, configs in by_transport.items():
        seconds = np.array([sum(c["stages_ms"]) / 1e3 for c in configs])
        uneven = sum(len({row[0] for row in c["stage_work_max"]}) > 1 for c in configs)
        figures: dict[str, Any] = {"configurations": len(configs),
                                   "with_uneven_partner_counts": uneven}
        for form in FORMS:
            columns = np.array([stage_columns(c, form) for c in configs])
            figures[form] = {
                "leave_one_out_mean_error": leave_one_out(columns, seconds),
                "fit_mean_error": StageModel.fit(*columns.T, seconds).fit_error}
        out[transport] = figures
    return {"what": "the stages' seconds of every algorithm x rank count at 1024², one "
                    "transport at a time, by a stage model whose communication ratio is "
                    "added (the volume model) or multiplies the bytes term (seed 004); mean "
                    "relative error leaving one configuration out, and in-sample",
            "forms": out}


def forms_table(forms: dict[str, Any]) -> list[str]:
    """The two forms side by side, per transport, as the performance page shows them."""
    lines = ["Seed 004's communication ratio as a factor against the volume model's added "
             "term (stage seconds, every algorithm x rank count; mean relative error):", "",
             "| transport | configurations (uneven partners) | added: left out / fitted "
             "| factor: left out / fitted |", "|---|---|---|---|"]
    for transport, f in forms["forms"].items():
        lines.append(f"| {transport} | {f['configurations']} "
                     f"({f['with_uneven_partner_counts']}) "
                     + "".join(f"| {percent(f[form]['leave_one_out_mean_error'])} / "
                               f"{percent(f[form]['fit_mean_error'])} " for form in FORMS)
                     + "|")
    return [*lines, ""]
