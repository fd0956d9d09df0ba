"""``bench tracer-tuned``'s headline plot: what each controller bought for its frame time.

One panel per path: every controller's mean SSIM against the full-quality frame over its mean
frame time as a share of the target, with a bar to 1 + its p95 error (how far off it went)."""

from __future__ import annotations

from pathlib import Path

from autotune_app.report import pyplot
from common.atomic_files import save_figure


def quality_plot(result: dict, path: Path) -> None:
    """One scene's controllers: mean SSIM over frame time / target, per path."""
    plt = pyplot()
    paths = list(next(iter(result["controllers"].values())))
    fig, axes = plt.subplots(1, len(paths), figsize=(5.0 * len(paths), 4.0), squeeze=False)
    for ax, path_name in zip(axes[0], paths, strict=True):
        for controller, figures in result["controllers"].items():
            f = figures[path_name]
            mean = f["mean_frame_ms"] / result["target_ms"]
            p95 = 1.0 + f["p95_abs_error_vs_target"]
            ssim = f["image_quality"]["mean_ssim"]
            ax.errorbar([mean], [ssim], xerr=[[0.0], [max(0.0, p95 - mean)]], fmt="o",
                        capsize=3, label=controller)
        ax.axvline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xlabel("mean frame / target (bar: to 1 + p95 |frame - target| / target)")
        ax.set_ylabel("mean SSIM vs 64 AO rays + shadows + Phong")
        ax.set_title(f"{result['scene']}: {path_name}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)
