"""The kernel-model paper's figures on this machine: the Q-Q plot and the accuracy box plots.

The kernel-model paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU
Execution Time Prediction using Machine Learning and Analytical Modeling" (Figs. 1-3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autotune_app.report import pyplot
from benchmarks.studies.kernel_models.launches import DeviceFacts, Run, feature_matrix
from benchmarks.studies.kernel_models.predictions import groups_of, holdout_key
from benchmarks.studies.kernel_models.tables import BAND
from common.atomic_files import output_dir, save_figure
from studies.kernel_models.learned_comparators import APPROACHES, accuracy


def log_residuals(runs: Sequence[Run], x: np.ndarray, log: bool) -> np.ndarray:
    """Standardized in-sample residuals of LR per kernel, on raw or log2 features and time."""
    from sklearn.linear_model import LinearRegression  # lazy: scikit-learn, only for --plots

    y = np.array([r.seconds for r in runs])
    out = []
    for idx in groups_of(runs, lambda r: r.kernel).values():
        xs, ys = (np.log2(x[idx]), np.log2(y[idx])) if log else (x[idx], y[idx])
        res = ys - LinearRegression().fit(xs, ys).predict(xs)
        if res.std() > 0:
            out.append(res / res.std())
    return np.concatenate(out) if out else np.array([])


def plot_qq(runs: Sequence[Run], x: np.ndarray, path: Path) -> None:
    """Fig. 1: normal Q-Q plot of LR residuals without and with the log2 transform."""
    from scipy import stats  # lazy: scipy.stats, only for --plots

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    for ax, log in zip(axes, (False, True), strict=True):
        stats.probplot(log_residuals(runs, x, log), plot=ax)
        ax.set_title(f"LR residuals, {'log2' if log else 'linear'} scale")
    fig.tight_layout()
    save_figure(fig, path)


def plot_accuracy(runs: Sequence[Run], preds: dict[str, np.ndarray], key: Callable[[Run], Any],
                  what: str, path: Path) -> None:
    """Figs. 2-3: accuracy box plots, one panel per kernel, a box per approach and group."""
    plt = pyplot()
    measured = np.array([r.seconds for r in runs])
    kernels = groups_of(runs, lambda r: r.kernel)
    fig, axes = plt.subplots(len(kernels), 1, figsize=(10, 2.2 * len(kernels)), squeeze=False)
    for ax, (kernel, idx) in zip(axes[:, 0], kernels.items(), strict=True):
        data, labels = [], []
        for a, p in preds.items():
            for g, sub in groups_of([runs[i] for i in idx], key).items():
                rows = np.array(idx)[sub]
                ok = rows[np.isfinite(p[rows])]
                if ok.size:
                    data.append(accuracy(p[ok], measured[ok]))
                    labels.append(f"{a}\n{g}")
        ax.boxplot(data, tick_labels=labels)
        ax.axhspan(*BAND, color="green", alpha=0.15)
        ax.set_yscale("log")
        ax.set_ylabel(f"{kernel}\npred/meas")
        ax.tick_params(axis="x", labelsize=6)
    axes[0, 0].set_title(f"accuracy per approach and {what}")
    fig.tight_layout()
    save_figure(fig, path)


def write_plots(runs: Sequence[Run], facts: dict[str, DeviceFacts],
                preds: dict[str, np.ndarray], split: str, folder: Path, force: bool) -> None:
    """The Q-Q plot and the accuracy box plots into ``folder``."""
    key = holdout_key(split)
    with output_dir(folder, force) as out:
        plot_qq(runs, feature_matrix(runs, facts), out / "seed003_qq.png")
        plot_accuracy(runs, preds, key, f"held-out {split}", out / "seed003_accuracy.png")
        mmsc = [i for i, r in enumerate(runs) if r.kernel == "MMSC"]
        learned = {a: preds[a][mmsc] for a in APPROACHES}
        plot_accuracy([runs[i] for i in mmsc], learned, key, f"held-out {split} (MMSC)",
                      out / "seed003_mmsc_learned.png")
