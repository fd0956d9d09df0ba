"""Learned predictors of a renderer's parts beside an analytical model: fitted, chosen, scored.

The parts are the ray tracer's phases or a rank's render: the own-work half of ``bench
kernel-models``. A part's rows hold its measured seconds (NaN where it did not run in that
frame) and, per feature set, a feature matrix. Every learned approach (LR, SVR, RF of the
kernel-model paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU Execution
Time Prediction using Machine Learning and Analytical Modeling";
``studies.kernel_models.learned_comparators``) is fitted per part on calibration rows only; the
hybrid fits the same approaches on the analytical model's residual ``measured / model`` and
predicts ``model * residual``. Each approach's configuration (feature set, log2 or raw) is
chosen by the least mean frame error on validation rows; test rows are only scored.

Scores per part and per frame (the sum of the parts that ran): mean ``|predicted - measured| /
measured`` and the paper's accuracy ``predicted / measured`` (mean and sd).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from studies.kernel_models.learned_comparators import APPROACHES, MIN_ROWS, LogRegressor, accuracy

TRANSFORMS = (True, False)  # log2 features and seconds, or raw ones


@dataclass(frozen=True)
class PartRows:
    """Measured frames: seconds per part (NaN where it did not run) and feature matrices."""

    parts: tuple[str, ...]
    measured: np.ndarray  # (rows, parts)
    features: Mapping[str, tuple[np.ndarray, ...]]  # feature set -> one (rows, k) per part

    def ran(self, part: int) -> np.ndarray:
        """Rows where the part ran."""
        return np.isfinite(self.measured[:, part])


@dataclass(frozen=True)
class Config:
    """One way to fit a learned approach: its features, log2 or raw, on the time or the
    analytical model's residual."""

    approach: str
    feature_set: str
    log2: bool
    hybrid: bool = False

    @property
    def name(self) -> str:
        """e.g. ``RF probe log2`` or ``hybrid-LR counts raw``."""
        head = f"hybrid-{self.approach}" if self.hybrid else self.approach
        return f"{head} {self.feature_set} {'log2' if self.log2 else 'raw'}"


def configs(approach: str, feature_sets: tuple[str, ...], hybrid: bool = False
            ) -> list[Config]:
    """Every configuration of one approach to choose from."""
    return [Config(approach, f, log2, hybrid) for f in feature_sets for log2 in TRANSFORMS]


def predict_parts(config: Config, cal: PartRows, rows: PartRows,
                  cal_model: np.ndarray | None = None, model: np.ndarray | None = None
                  ) -> np.ndarray:
    """(rows, parts) seconds of ``rows`` by ``config`` fitted on ``cal`` (NaN where a part did
    not run); a hybrid needs the analytical model's seconds of both (``cal_model``, ``model``)."""
    if config.hybrid and (cal_model is None or model is None):
        raise ValueError(f"{config.name} needs the analytical model's seconds of both row sets")
    out = np.full(rows.measured.shape, np.nan)
    for j, part in enumerate(rows.parts):
        train, wanted = cal.ran(j), rows.ran(j)
        if not wanted.any():
            continue
        if train.sum() < MIN_ROWS:
            raise ValueError(f"{part}: {int(train.sum())} calibration rows, {MIN_ROWS} needed")
        y = cal.measured[train, j]
        if config.hybrid:
            y = y / cal_model[train, j]
        fitted = LogRegressor(config.approach, log2=config.log2).fit(
            cal.features[config.feature_set][j][train], y)
        predicted = fitted.predict(rows.features[config.feature_set][j][wanted])
        out[wanted, j] = predicted * model[wanted, j] if config.hybrid else predicted
    return out


def frame_seconds(parts: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Per row: the sum over the parts that ran (finite in ``measured``)."""
    return np.where(np.isfinite(measured), parts, 0.0).sum(axis=1)


def stats(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Mean relative error, accuracy mean and sd, count."""
    if predicted.size == 0:
        return {"mean_error": float("nan"), "accuracy_mean": float("nan"),
                "accuracy_sd": float("nan"), "n": 0}
    acc = accuracy(predicted, measured)
    return {"mean_error": float(np.mean(np.abs(acc - 1.0))),
            "accuracy_mean": float(acc.mean()), "accuracy_sd": float(acc.std()),
            "n": int(predicted.size)}


def scores(predicted: np.ndarray, rows: PartRows) -> dict[str, dict[str, float]]:
    """:func:`stats` per part (over the rows it ran) and per frame."""
    out = {}
    for j, part in enumerate(rows.parts):
        ran = rows.ran(j)
        out[part] = stats(predicted[ran, j], rows.measured[ran, j])
    out["frame"] = stats(frame_seconds(predicted, rows.measured),
                         frame_seconds(rows.measured, rows.measured))
    return out


def group_scores(predicted: np.ndarray, rows: PartRows, groups: Sequence[str]
                 ) -> dict[str, dict[str, float]]:
    """Frame :func:`stats` per group of rows (``groups``: one label per row, e.g. its scene)."""
    labels = np.asarray(groups)
    frame, truth = frame_seconds(predicted, rows.measured), frame_seconds(rows.measured,
                                                                          rows.measured)
    return {g: stats(frame[labels == g], truth[labels == g]) for g in dict.fromkeys(groups)}


@dataclass(frozen=True)
class Choice:
    """One approach's configuration chosen on validation rows, with its predictions."""

    config: Config
    validation_errors: dict[str, float]  # every configuration's validation mean frame error
    validation: np.ndarray  # (rows, parts) of the validation set
    test: np.ndarray


def choose(candidates: list[Config], cal: PartRows, val: PartRows, test: PartRows,
           model: Mapping[str, np.ndarray] | None = None) -> Choice:
    """Fit every candidate on ``cal``; keep the least mean frame error on ``val``, and predict
    ``test`` with it. ``model``: the analytical model's seconds per set (keys cal, val, test),
    for hybrids."""
    m = model or {}
    best: tuple[float, Config, np.ndarray] | None = None
    errors = {}
    for c in candidates:
        predicted = predict_parts(c, cal, val, m.get("cal"), m.get("val"))
        errors[c.name] = scores(predicted, val)["frame"]["mean_error"]
        if best is None or errors[c.name] < best[0]:
            best = (errors[c.name], c, predicted)
    if best is None:
        raise ValueError("no configuration to choose from")
    _, config, validation = best
    return Choice(config, errors, validation,
                  predict_parts(config, cal, test, m.get("cal"), m.get("test")))


def best_of(choices: Mapping[str, Choice]) -> str:
    """The name of the choice with the least validation mean frame error."""
    return min(choices, key=lambda a: choices[a].validation_errors[choices[a].config.name])


def learned_and_hybrid(feature_sets: tuple[str, ...], cal: PartRows, val: PartRows,
                       test: PartRows, model: Mapping[str, np.ndarray]
                       ) -> dict[str, Choice]:
    """LR, SVR, RF and the hybrid (the approach and configuration whose residual fit does best
    on validation), each chosen on ``val``."""
    out = {a: choose(configs(a, feature_sets), cal, val, test) for a in APPROACHES}
    hybrids = {a: choose(configs(a, feature_sets, hybrid=True), cal, val, test, model)
               for a in APPROACHES}
    every = {k: v for h in hybrids.values() for k, v in h.validation_errors.items()}
    out["hybrid"] = replace(hybrids[best_of(hybrids)], validation_errors=every)
    return out
