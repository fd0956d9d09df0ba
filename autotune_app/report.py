"""One way for every benchmark to print its figures: a human table, or JSON on stdout."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """Make numpy scalars / non-finite floats JSON-safe."""
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value




def emit(figures: Mapping[str, Any], as_json: bool, title: str = "") -> None:
    """Print ``figures`` as JSON (``as_json``) or as an indented key/value table."""
    if as_json:
        json.dump(plain(figures), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    if title:
        print(title)
        print("=" * len(title))
    _print_table(plain(figures), indent=0)


def _print_table(figures: Mapping[str, Any], indent: int) -> None:
    pad = " " * indent
    width = max((len(k) for k in figures), default=0)
    for key, value in figures.items():
        if isinstance(value, Mapping):
            print(f"{pad}{key}:")
            _print_table(value, indent + 2)
        elif isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
            print(f"{pad}{key}:")
            for i, item in enumerate(value, 1):
                label = item.get("scene") or item.get("name") if isinstance(item, Mapping) else None
                print(f"{pad}  [{i}]{f' {label}' if label else ''}")
                if isinstance(item, Mapping):
                    _print_table(item, indent + 4)
                else:
                    print(f"{pad}    {_cell(item)}")
        else:
            print(f"{pad}{key:<{width}}  {_cell(value)}")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return str(value)


def tracking_figures(logs: Sequence[Any], turn_at: int | None = None) -> dict[str, float]:
    """Tracking error vs target, over-budget frames, model errors and probe time of any
    renderer's frame logs (each with ``measured``, ``target``, ``predicted``, ``corrected``
    and ``probe_seconds``)."""
    m = np.array([x.measured for x in logs])
    t = np.array([x.target for x in logs])
    p = np.array([x.predicted for x in logs])
    c = np.array([x.corrected for x in logs])
    track = np.abs(m - t) / t
    out = {
        "frames": len(logs),
        "mean_abs_error_vs_target": float(track.mean()),
        "p95_abs_error_vs_target": float(np.percentile(track, 95)),
        "frames_over_budget": int((m > t * 1.05).sum()),
        "mean_model_error": mean_where_priced(np.abs(p - m) / m),
        "mean_model_feedback_error": mean_where_priced(np.abs(c - m) / m),
        "mean_probe_ms": float(np.mean([x.probe_seconds for x in logs]) * 1e3),
        "error_first_frame": float(track[0]),  # a fresh renderer's: the scene's first frame
    }
    if turn_at is not None and turn_at < len(logs):
        out["error_first_frame_after_turn"] = float(track[turn_at])
    return out


def mean_where_priced(errors: np.ndarray) -> float | None:
    """Mean of the frames that had a prediction (NaN: a model-free controller priced none);
    None where no frame had one."""
    priced = errors[np.isfinite(errors)]
    return float(priced.mean()) if priced.size else None


TRACKING = (  # (figure, label, format): a line for each figure present, in this order
    ("mean_abs_error_vs_target", "mean |frame - target| / target", "{:.1%}"),
    ("p95_abs_error_vs_target", "p95  |frame - target| / target", "{:.1%}"),
    ("frames_over_budget", "frames over budget (>5%)", "{} of {frames}"),
    ("mean_model_error", "mean model error", "{:.1%}"),
    ("mean_model_feedback_error", "mean model + feedback error", "{:.1%}"),
    ("error_first_frame", "first frame |frame - target| / target", "{:.1%}"),
    ("mean_ao_rays", "mean AO rays chosen", "{:.1f}"),
    ("mean_sampling_rate", "mean sampling rate chosen", "{:.2f} samples/voxel"),
    ("mean_image_scale", "mean image scale chosen", "{:.2f}"),
    ("mean_ert_threshold", "mean ERT threshold chosen", "{:.2f}"),
    ("mean_probe_ms", "mean probe time", "{:.2f} ms"),
)


def tracking_report(figures: Mapping[str, Any]) -> str:
    """How well a run held its target, as lines (the figures of ``animation.summarize``, or
    any renderer's ``tracking_figures`` plus its mean knobs)."""
    return "".join(f"{label:<31}: {fmt.format(figures[key], **figures)}\n"
                   for key, label, fmt in TRACKING if key in figures)


def pyplot() -> Any:
    """matplotlib.pyplot on the headless Agg backend (benchmarks run without a display)."""
    import matplotlib  # lazy: only plots need matplotlib, and it is slow to import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after the backend is chosen

    return plt


_STATISTICS = {"mean": np.mean, "median": np.median, "p95": lambda a: np.percentile(a, 95),
               "max": np.max}


def summary_stats(values: Iterable[float], keys: Sequence[str] = ("mean", "median", "p95", "max"),
                  scale: float = 1.0, suffix: str = "") -> dict[str, float]:
    """Named statistics of ``values`` (times ``scale``), NaN when there are none.

    The one helper behind every "mean / p95 of ..." figure (viewer runs, benchmarks); ``keys``
    pick from mean, median, p95 and max, ``suffix`` names the unit ("_us").
    """
    a = np.asarray(list(values), np.float64) * scale
    return {f"{k}{suffix}": float(_STATISTICS[k](a)) if a.size else math.nan for k in keys}
