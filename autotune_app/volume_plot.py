"""The plot of an ``autotune volume`` run: rank 0's frame by phase, every rank's render time,
and for governed runs target vs measured vs predicted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from autotune_app.report import pyplot
from common.atomic_files import save_figure


def plot(rows: list[dict[str, Any]], records: list[dict[str, Any]], summary: dict[str, Any],
         path: Path) -> None:
    """Rank 0's frame split into render / composite / gather / upscale per frame, every
    rank's render time, and for governed runs target vs measured vs predicted."""
    plt = pyplot()
    governed = "measured_ms" in rows[0]
    n = 3 if governed else 2
    fig, axes = plt.subplots(n, 1, figsize=(8.0, 2.6 * n + 0.6), sharex=True)
    x = np.array([r["frame"] for r in rows])
    ax = axes[0]
    bottom = np.zeros(len(rows))
    for key, label in (("render_ms", "local render (rank 0)"),
                       ("composite_ms", "compositing (rank 0)"), ("gather_ms", "gather"),
                       ("upscale_ms", "upscale")):
        vals = np.array([r[key] for r in rows])
        ax.bar(x, vals, bottom=bottom, width=0.9, label=label)
        bottom += vals
    ax.plot(x, [r["render_max_ms"] for r in rows], "k.", ms=3, label="slowest rank's render")
    ax.set_ylabel("ms")
    ax.set_title(f"{summary['volume']}, {summary['ranks']} rank(s), {summary['algorithm']}, "
                 f"{summary['width']}x{summary['height']}: rank 0's frame")
    ax.legend(fontsize=7, loc="upper right", ncol=3)
    ax = axes[1]
    per_rank = np.array([[r["render_seconds"] for r in rec["ranks"]] for rec in records]) * 1e3
    for r in range(per_rank.shape[1]):
        ax.plot(x, per_rank[:, r], lw=1, label=f"rank {r}")
    ax.set_ylabel("local render ms")
    ax.legend(fontsize=7, loc="upper right", ncol=min(8, per_rank.shape[1]))
    if governed:
        ax = axes[2]
        ax.axhline(rows[0]["target_ms"], color="k", lw=1, label="target")
        ax.plot(x, [r["measured_ms"] for r in rows], "-", lw=1.2, label="measured")
        ax.plot(x, [r["predicted_ms"] for r in rows], "--", lw=1, label="predicted (model)")
        ax.plot(x, [r["corrected_ms"] for r in rows], ":", lw=1,
                label="predicted + feedback")
        ax.set_ylabel("frame ms")
        ax.legend(fontsize=7, loc="upper right", ncol=4)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[-1].set_xlabel("frame")
    fig.tight_layout()
    save_figure(fig, path)
