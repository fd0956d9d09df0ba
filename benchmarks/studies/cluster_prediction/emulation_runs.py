"""Histograms of the measured runs, and the emulation runs (training rows) made from them."""

from __future__ import annotations

import dataclasses
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.studies.cluster_prediction.mpi_runs import CURRENT_STEP, FASTER_STEP, launch_part
from common.atomic_files import write_json
from studies.cluster_prediction.files import (
    read_training_data,
    write_histogram,
    write_training_data,
)
from studies.cluster_prediction.perf_histogram import PathHistogram
from studies.cluster_prediction.training_data import EmulationConfig, TrainingData

#: histogram ids: "m" the current node from its real runs (emulation fidelity), "nc" / "nt"
#: the current / faster node from their node runs (the training rows' / the test rows'
#: features); the ids and the source differ from the real-run "t" histograms of data written
#: before issue 20, so a reused data folder never serves an emulation of those
KINDS = {("real", CURRENT_STEP): ("m", "measured"),
         ("node", CURRENT_STEP): ("nc", "node-run"), ("node", FASTER_STEP): ("nt", "node-run")}
#: the histograms the training rows emulate: the current node's node runs, measured as a test
#: row's features are (a node's own runs, no compositing, no other rank). The real runs'
#: histograms are wider (bonsai 384² on one rank: 27-51 ms against 30-35 ms), so a net
#: trained on them met the test rows' narrow histograms outside what it had seen
TRAINING_KIND = "nc"
STALL_CV = 0.3  # frame-time std / mean above this: a stall (a numba kernel loading on its
# first call, 1-3 s, before warm_blend; or the shared machine) more likely than the draws


def run_histogram(run: dict[str, Any], volume: str) -> PathHistogram:
    """The path histogram of one real or node run's local render times."""
    t = np.asarray(run["render_seconds"], np.float64)
    meta = {"volume": volume, "step": run["step"], "image": f"{run['size']}x{run['size']}",
            "ranks": run["ranks"], "rank_means": t.mean(axis=0).tolist(),
            "frames": int(t.shape[0]), "threads_per_rank": 1, "run": run["key"],
            "source": "autotune bench cluster-prediction"}
    return PathHistogram.of(t, meta)


def generated_source(scale: float) -> str:
    """The source name of the histograms generated at ``scale``: "g<scale>"."""
    return f"g{scale:g}"


def generated_id(scale: float, base: str, ranks: int) -> str:
    """The id of the histogram generated at ``scale`` from histogram ``base`` for ``ranks``
    emulated ranks: "g<scale>:<base id>:<ranks>" (read back by :func:`is_training_histogram`)."""
    return f"{generated_source(scale)}:{base}:{ranks}"


def is_training_histogram(hist_id: str) -> bool:
    """Whether an emulation row of this histogram id is a training row: the current node's
    node-run histograms and those generated from them (:func:`generated_id`)."""
    base = hist_id.split(":")[1] if hist_id.startswith("g") and ":" in hist_id else hist_id
    return base.startswith(TRAINING_KIND)


def histograms(cfg: dict[str, Any], real: dict[str, Any], node: dict[str, Any], work: Path
               ) -> tuple[dict[str, tuple[Any, str]], dict[tuple[str, int, int], str]]:
    """Measured (current node), node-run and generated histograms by id; and the id of the
    training histogram each (size, emulated ranks) uses. The faster node's real runs make
    no histogram: nothing of them may reach a model."""
    hists: dict[str, tuple[Any, str]] = {}
    folder = work / "histograms"
    folder.mkdir(exist_ok=True)
    for part, runs in (("real", real), ("node", node)):
        for run in runs.values():
            if (part, run["step"]) not in KINDS:
                continue
            kind, source = KINDS[(part, run["step"])]
            h = run_histogram(run, cfg["volume"])
            hists[f"{kind}{run['size']}r{run['ranks']}"] = (h, source)
            write_histogram(folder / f"{cfg['volume']}_{run['size']}px_{run['ranks']}ranks_step"
                                     f"{run['step']:g}_{part}.json", h)
    use: dict[tuple[str, int, int], str] = {}
    for size in cfg["sizes"]:
        for ranks in cfg["emu_ranks"]:
            base = max(r for r in cfg["real_ranks"] if r <= ranks)
            mid = f"{TRAINING_KIND}{size}r{base}"
            use[(TRAINING_KIND, size, ranks)] = mid
            for scale in cfg["scales"]:
                gid = generated_id(scale, mid, ranks)
                rng = np.random.default_rng(zlib.crc32(gid.encode()))
                hists[gid] = (hists[mid][0].scaled(scale).perturbed(rng), "generated")
                use[(generated_source(scale), size, ranks)] = gid
    return hists, use


def emulation_plan(cfg: dict[str, Any], use: dict[tuple[str, int, int], str]
                   ) -> list[EmulationConfig]:
    """Training rows (the current node's node-run histograms and generated ones, shared memory
    and the slow network), emulation of the current node's real runs from their own render
    times (its fidelity) and histogram emulation of the faster node's node runs (emulation as
    a predictor)."""
    f = cfg["frames"]
    gens = [generated_source(s) for s in cfg["scales"]]
    out = []
    for size in cfg["sizes"]:
        for ranks in cfg["emu_ranks"]:
            for src in [TRAINING_KIND, *gens]:
                for mode in ("histogram", "per-frame"):
                    out.append(EmulationConfig(use[(src, size, ranks)], size, size, ranks, mode, f))
            for src in [TRAINING_KIND, *gens[: cfg["slow_sources"] - 1]]:
                out.append(EmulationConfig(use[(src, size, ranks)], size, size, ranks,
                                           "histogram", f, "slow"))
        for ranks in cfg["real_ranks"]:
            for mode in ("vector", "histogram", "per-frame"):
                out.append(EmulationConfig(f"m{size}r{ranks}", size, size, ranks, mode, f))
            out.append(EmulationConfig(f"nt{size}r{ranks}", size, size, ranks, "histogram", f))
    return out


def emulate(configs: list[EmulationConfig], hists: dict[str, tuple[Any, str]],
            data_path: Path) -> TrainingData:
    """Run the configurations not yet in the data file (one job; a rerun resumes)."""
    todo = read_training_data(data_path, missing_ok=True).pending(configs)
    if todo:
        ids = {c.hist for c in todo}
        with tempfile.TemporaryDirectory(prefix="autotune-cluster-plan-") as tmp:
            plan = Path(tmp) / "emulation_plan.json"
            write_json(plan, {"label": "emulation",
                              "histograms": {i: {"hist": hists[i][0].to_dict(),
                                                 "source": hists[i][1]} for i in ids},
                              "configs": [dataclasses.asdict(c) for c in todo]}, indent=None)
            launch_part("emulate", max(c.ranks for c in todo), [str(plan), str(data_path)])
    return read_training_data(data_path)


def remeasure_stalls(configs: list[EmulationConfig], hists: dict[str, tuple[Any, str]],
                     data_path: Path) -> tuple[TrainingData, list[str]]:
    """Rows of the plan whose frame times suggest a stall (std > STALL_CV x mean) are dropped
    and measured again, once; a row that still has that spread is kept as measured."""
    data = read_training_data(data_path)
    keys = {c.key for c in configs}
    stalled = [r["key"] for r in data.rows if r["key"] in keys and not r.get("remeasured")
               and r.get("frame_seconds_std", 0.0) > STALL_CV * r["frame_seconds"]]
    if stalled:
        data.rows = [r for r in data.rows if r["key"] not in stalled]
        write_training_data(data_path, data)
        data = emulate(configs, hists, data_path)
        for r in data.rows:  # kept as measured if it stalls again: then it is no accident
            if r["key"] in stalled:
                r["remeasured"] = True
        write_training_data(data_path, data)
    again = [r["key"] for r in data.rows if r.get("remeasured")
             and r.get("frame_seconds_std", 0.0) > STALL_CV * r["frame_seconds"]]
    return data, again
