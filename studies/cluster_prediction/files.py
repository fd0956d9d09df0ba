"""The cluster model's files: performance histograms, training data, trained models.

Every file is versioned JSON, written atomically (common.atomic_files) and read with one
clear error that names the file: a missing or corrupt file, a histogram without samples,
training rows with a missing field or a NaN, a model from another version.
"""

from __future__ import annotations

import os
from pathlib import Path

from common.atomic_files import write_json
from common.json_file import read_json
from studies.cluster_prediction.model import ClusterModel, ClusterModelError
from studies.cluster_prediction.perf_histogram import HistogramError, PathHistogram
from studies.cluster_prediction.training_data import TrainingData, TrainingDataError

PathLike = str | os.PathLike[str]
DEFAULT_MODEL = Path(__file__).resolve().parent / "data" / "cluster_model.json"


def read_histogram(path: PathLike) -> PathHistogram:
    """A performance histogram file (``PathHistogram.to_dict``)."""
    path = Path(path)
    return PathHistogram.from_dict(read_json(path, HistogramError, "performance histogram"),
                                   str(path))


def write_histogram(path: PathLike, hist: PathHistogram) -> Path:
    return write_json(path, hist.to_dict())


def read_model(path: PathLike | None = None) -> ClusterModel:
    """A trained cluster model (default: the one shipped; its ``meta`` names the machine that
    trained it, and `autotune bench cluster-prediction --save` trains one for this machine
    into results/<machine>/cluster/)."""
    path = Path(path) if path is not None else DEFAULT_MODEL
    hint = (" (train one with `autotune bench cluster-prediction --save` and pass --model)"
            if path == DEFAULT_MODEL else "")
    return ClusterModel.from_dict(read_json(path, ClusterModelError, "cluster model", hint),
                                  str(path))


def write_model(path: PathLike, model: ClusterModel) -> Path:
    return write_json(path, model.to_dict())


def read_training_data(path: PathLike, missing_ok: bool = False) -> TrainingData:
    """Training rows; a missing file is empty data when ``missing_ok`` (a fresh generator run)."""
    path = Path(path)
    if missing_ok and not path.exists():
        return TrainingData.empty()
    return TrainingData.from_dict(read_json(path, TrainingDataError, "training data"), str(path))


def write_training_data(path: PathLike, data: TrainingData) -> Path:
    """The whole file, atomically: a reader (or a crash) sees the rows before or after."""
    return write_json(path, data.to_dict(), indent=None)
