"""The benchmark's figures: upgrade, emulation fidelity and faster network, over ranks.

Figures 5 and 6 are those of the cluster study (Tkachev et al., "Prediction of Distributed
Volume Visualization Performance to Support Render Hardware Acquisition").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune_app.report import pyplot
from common.atomic_files import save_figure


def plot(cfg: dict[str, Any], plots: dict[str, Any], folder: Path, cores: int) -> None:
    """The upgrade, emulation and faster-network figures (oversubscribed ranks shaded)."""
    plt = pyplot()
    sizes = cfg["sizes"]

    def panels(title: str) -> tuple[Any, Any]:
        fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 3.6), squeeze=False)
        fig.suptitle(title, fontsize=10)
        return fig, axes[0]

    up = plots["upgrade"]
    fig, axes = panels("Upgrade: trained on the current node, real runs of the faster node, "
                       "features from node runs (Tkachev et al. Fig. 6)")
    for ax, size in zip(axes, sizes, strict=True):
        _curves(ax, up, size, {"nn_term": ("b-", "NN + term (Tkachev et al. + term)"),
                               "nn_analytic": ("c-", "NN on E[max] + term"),
                               "nn_term_per_frame": ("g--", "NN + term, per-frame hists"),
                               "analytic_term": ("r:", "E[max] + term"),
                               "emulation_of_node_run_histograms": ("mx", "emulation")})
        _axes(ax, f"{size}²", cores)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, folder / "cluster_upgrade.png")

    fig, axes = panels("Emulation against real runs: vectors vs histograms (Tkachev et al. Fig. 5)")
    marks = {"vector": "rs", "histogram": "bx", "per-frame": "g+"}
    for ax, size in zip(axes, sizes, strict=True):
        for mode, pairs in plots["fig5"].items():
            sel = sorted((p for p in pairs if p[2]["size"] == size and p[2]["step"] == 1.0),
                         key=lambda p: p[2]["ranks"])
            if mode == "vector":
                ax.plot([p[2]["ranks"] for p in sel], [1e3 * p[1] for p in sel], "ko-",
                        label="real (current node)")
            ax.plot([p[2]["ranks"] for p in sel], [1e3 * p[0] for p in sel], marks[mode],
                    label=f"{mode} emulation")
        _axes(ax, f"{size}²", cores)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, folder / "cluster_emulation.png")

    net = plots["network"]["faster_node"]
    fig, axes = panels("Faster network: trained on the slow network, real runs of the faster "
                       "node on shared memory")
    for ax, size in zip(axes, sizes, strict=True):
        _curves(ax, net, size, {"nn_term_swapped": ("b-", "NN, term swapped"),
                                "nn_analytic_swapped": ("c-", "NN on E[max] + term, swapped"),
                                "analytic_term": ("r:", "E[max] + term"),
                                "nn_no_term (seed)": ("r--", "NN, no term")})
        _axes(ax, f"{size}²", cores)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, folder / "cluster_network.png")


def _curves(ax: Any, got: dict[str, Any], size: int, styles: dict[str, tuple[str, str]]
            ) -> None:
    """Real runs of one image size and the predictions named in ``styles``, over ranks."""
    idx = sorted((i for i, r in enumerate(got["rows"]) if r["width"] == size),
                 key=lambda i: got["rows"][i]["ranks"])
    rk = [got["rows"][i]["ranks"] for i in idx]
    ax.plot(rk, 1e3 * got["measured"][idx], "ko", label="real runs")
    for key, (style, label) in styles.items():
        ax.plot(rk, 1e3 * got["preds"][key][idx], style, label=label)


def _axes(ax: Any, title: str, cores: int) -> None:
    """Title, shaded oversubscribed ranks, labels and grid of one panel."""
    ax.set_title(title, fontsize=9)
    ax.axvspan(cores + 0.5, ax.get_xlim()[1], color="0.9", label="oversubscribed")
    ax.set_xlabel("ranks")
    ax.set_ylabel("mean frame time (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
