"""Each run predicted by BSP, Hong–Kim and the learned models, held out as the paper holds out.

The kernel-model paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU
Execution Time Prediction using Machine Learning and Analytical Modeling".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.studies.kernel_models.launches import DeviceFacts, Run, thread_access, thread_count
from models.device_profile import DeviceProfile
from models.hong_kim import predict_seconds
from studies.kernel_models.bsp import bsp_seconds, fit_lambda, seed_counts
from studies.kernel_models.learned_comparators import APPROACHES, MIN_ROWS, LogRegressor


def lambda_run(runs: Sequence[Run], idx: Sequence[int]) -> int:
    """The run of ``idx`` that lambda is fitted on: the middle size at the smallest block."""
    block = min(runs[i].block for i in idx)
    at_block = sorted((i for i in idx if runs[i].block == block), key=lambda i: runs[i].n)
    return at_block[len(at_block) // 2]


def bsp_unit_seconds(run: Run, dev: DeviceFacts) -> float:
    """Eq. 3 with lambda = 1 for one run."""
    counts = seed_counts(run.kernel, run.n, run.block)
    return bsp_seconds(counts, thread_count(run.kernel, run.n), dev.clock_mhz * 1e6,
                       dev.cores * dev.simd_width)


def groups_of(runs: Sequence[Run], key: Callable[[Run], Any]) -> dict[Any, list[int]]:
    """Indices of ``runs`` per ``key``, in first-seen order."""
    out: dict[Any, list[int]] = {}
    for i, r in enumerate(runs):
        out.setdefault(key(r), []).append(i)
    return out


def bsp_predictions(runs: Sequence[Run], devices: dict[str, DeviceFacts]
                    ) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    """BSP seconds per run (NaN at each lambda run) and lambda per device and kernel."""
    pred = np.full(len(runs), np.nan)
    lambdas: dict[str, dict[str, float]] = {}
    for (device, kernel), idx in groups_of(runs, lambda r: (r.device, r.kernel)).items():
        fit = lambda_run(runs, idx)
        lam = fit_lambda(bsp_unit_seconds(runs[fit], devices[device]), runs[fit].seconds)
        lambdas.setdefault(device, {})[kernel] = lam
        for i in idx:
            if i != fit:
                pred[i] = bsp_unit_seconds(runs[i], devices[device]) / lam
    return pred, lambdas


def hk_predictions(runs: Sequence[Run], profiles: dict[str, DeviceProfile | None]) -> np.ndarray:
    """Hong–Kim seconds per run from the kernels' own counts (NaN where no profile)."""
    pred = np.full(len(runs), np.nan)
    for i, r in enumerate(runs):
        profile = profiles.get(r.device)
        if profile is None:
            continue
        a = thread_access(r.kernel, r.n, r.block)
        pred[i] = float(predict_seconds(
            profile, a.flops + a.ld_sm + a.st_sm, a.ld_coal + a.st_coal,
            a.ld_uncoal + a.st_uncoal, a.barriers, r.block,
            thread_count(r.kernel, r.n) // r.block))
    return pred


DEVICE_SPLIT_DEVICES = 3  # a device split trains on the others: two or more, so they vary


def default_split(devices: int) -> str:
    """What the learned models hold out by default: a device where :data:`DEVICE_SPLIT_DEVICES`
    or more build (the paper's protocol), else a size. Trained on one device, the device
    features are constant and a model cannot learn what they do: with two runtimes on one
    Zen 4, LR's every held-out prediction ran past its training range."""
    return "device" if devices >= DEVICE_SPLIT_DEVICES else "size"


def holdout_key(split: str) -> Callable[[Run], Any]:
    """What one fold holds out: a device, or a size."""
    if split == "device":
        return lambda r: r.device
    if split == "size":
        return lambda r: r.n
    raise ValueError(f"split must be 'device' or 'size', got {split!r}")


def folds(runs: Sequence[Run], split: str) -> list[tuple[list[int], list[int]]]:
    """(train, test) indices per kernel and held-out group; a fold with too few rows to train
    on is left out (its runs stay unpredicted)."""
    key = holdout_key(split)
    out = []
    for idx in groups_of(runs, lambda r: r.kernel).values():
        for held in dict.fromkeys(key(runs[i]) for i in idx):
            test = [i for i in idx if key(runs[i]) == held]
            train = [i for i in idx if key(runs[i]) != held]
            if len(train) >= MIN_ROWS:
                out.append((train, test))
    return out


def learned_predictions(runs: Sequence[Run], x: np.ndarray, split: str
                        ) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Seconds per run and learned approach, each run predicted by the fold that held it out,
    and per approach how many predictions were held to the training range
    (:class:`~studies.kernel_models.learned_comparators.LogRegressor`)."""
    y = np.array([r.seconds for r in runs])
    pred = {a: np.full(len(runs), np.nan) for a in APPROACHES}
    clipped = dict.fromkeys(APPROACHES, 0)
    for train, test in folds(runs, split):
        for approach in APPROACHES:
            model = LogRegressor(approach).fit(x[train], y[train])
            pred[approach][test] = model.predict(x[test])
            clipped[approach] += model.clipped
    return pred, clipped
