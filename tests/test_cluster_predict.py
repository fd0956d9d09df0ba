"""``autotune predict`` end to end on a tiny model, and one clear error naming the file for every
bad histogram, training-data or model file (issue 14)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from autotune_app.cli import main
from studies.cluster_prediction.files import (
    read_histogram,
    read_model,
    read_training_data,
    write_histogram,
    write_model,
    write_training_data,
)
from studies.cluster_prediction.model import (
    ClusterModel,
    ClusterModelError,
    CompositingTerm,
    Network,
)
from studies.cluster_prediction.perf_histogram import HistogramError, PathHistogram
from studies.cluster_prediction.training_data import TrainingData, TrainingDataError

TERM = CompositingTerm(1e-4, 1e9, 5e8)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A tiny hand-made model (16 features -> 4 ReLU -> 1; no training needed here: the
    network's fit is tested in test_cluster_model.py) and a histogram file."""
    rng = np.random.default_rng(0)
    model = ClusterModel([Network([rng.normal(size=(16, 4)), rng.normal(size=(4, 1))],
                                 [np.zeros(4), np.zeros(1)])], np.zeros(16), np.ones(16), 20.0, 5.0,
                         TERM, 0.1, {"ranks": [1, 8], "image_pixels": [128**2, 256**2]})
    folder = tmp_path_factory.mktemp("predict")
    write_model(folder / "m.json", model)
    hist = PathHistogram.of(rng.gamma(5.0, 0.004, (6, 4)))
    write_histogram(folder / "h.json", hist)
    return folder, hist


def _predict(capsys, *args):
    code = main(["predict", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_prints_the_mean_frame_time(files, capsys):
    folder, hist = files
    code, out, _ = _predict(capsys, "--histogram", folder / "h.json", "--ranks", 4,
                            "--image", "256x256", "--model", folder / "m.json", "--json")
    assert code == 0
    got = json.loads(out)
    assert 0 < got["predicted_frame_ms"] < 1e4 and got["notes"] == []
    assert got["compositing_term_ms"] == pytest.approx(1e3 * float(TERM.seconds(256**2, 4)))
    assert got["analytic_frame_ms"] == pytest.approx(
        1e3 * (hist.overall.expected_max(4) + float(TERM.seconds(256**2, 4))))
    # a faster network: only the term changes
    code, out2, _ = _predict(capsys, "--histogram", folder / "h.json", "--ranks", 4, "--image",
                             "256x256", "--model", folder / "m.json", "--json",
                             "--bandwidth", 10, "--latency", 1)
    fast = json.loads(out2)
    fast_term = CompositingTerm(1e-6, 1e10, TERM.blend_rate)
    assert fast["predicted_frame_ms"] - got["predicted_frame_ms"] == pytest.approx(
        1e3 * float(fast_term.seconds(256**2, 4) - TERM.seconds(256**2, 4)), rel=1e-6)
    code, text, _ = _predict(capsys, "--histogram", folder / "h.json", "--ranks", 64,
                             "--image", "2048x2048", "--model", folder / "m.json")
    assert code == 0 and "predicted mean frame time:" in text
    assert "outside the 1..8" in text and "analytic" in text
    assert "shared cores" not in text  # a model that does not say where it was trained
    shared = folder / "m_cores.json"
    d = json.loads((folder / "m.json").read_text())
    shared.write_text(json.dumps({**d, "meta": {**d["meta"], "cores": 2}}))
    for ranks, said in ((2, False), (4, True)):
        code, out3, _ = _predict(capsys, "--histogram", folder / "h.json", "--ranks", ranks,
                                 "--image", "256x256", "--model", shared, "--json")
        assert code == 0
        assert any("2-core machine" in n for n in json.loads(out3)["notes"]) is said


def test_predict_bad_arguments_and_files(files, capsys, tmp_path):
    folder, _ = files
    code, _, err = _predict(capsys, "--histogram", tmp_path / "none.json", "--ranks", 4,
                            "--image", "64x64", "--model", folder / "m.json")
    assert code == 2 and "none.json" in err and "not found" in err
    bad = tmp_path / "old_model.json"
    bad.write_text(json.dumps({**json.loads((folder / "m.json").read_text()), "version": 0}))
    code, _, err = _predict(capsys, "--histogram", folder / "h.json", "--ranks", 4, "--image",
                            "64x64", "--model", bad)
    assert code == 2 and "old_model.json" in err and "version" in err
    assert err.count("\n") == 1  # one line, no traceback
    with pytest.raises(SystemExit):
        main(["predict", "--histogram", "h.json", "--ranks", "4", "--image", "64by64"])


def test_bad_histogram_files_name_the_file(files, tmp_path):
    folder, hist = files
    d = hist.to_dict()
    d["overall"]["samples"] = 0
    (tmp_path / "zero.json").write_text(json.dumps(d))
    with pytest.raises(HistogramError, match=r"zero\.json.*at least one sample"):
        read_histogram(tmp_path / "zero.json")
    (tmp_path / "v9.json").write_text(json.dumps(hist.to_dict() | {"version": 9}))
    with pytest.raises(HistogramError, match=r"v9\.json.*version 9"):
        read_histogram(tmp_path / "v9.json")
    (tmp_path / "cut.json").write_text(json.dumps(hist.to_dict())[:40])
    with pytest.raises(HistogramError, match=r"cut\.json.*not valid JSON"):
        read_histogram(tmp_path / "cut.json")
    assert read_histogram(folder / "h.json").overall == hist.overall


def _row(**over):
    row = {"key": "k", "hist": "h", "width": 8, "height": 8, "ranks": 2, "mode": "histogram",
           "frames": 3, "network": "shm", "frame_seconds": 0.1, "features": [0.1] * 13,
           "spread": [0.0] * 3}
    return row | over


def test_bad_training_data_names_the_file_and_row(tmp_path):
    path = tmp_path / "data.json"
    data = TrainingData.empty()
    data.add(_row())
    write_training_data(path, data)
    assert read_training_data(path).rows[0]["key"] == "k"
    cases = {"missing field 'frame_seconds'": {k: v for k, v in _row().items()
                                               if k != "frame_seconds"},
             "NaN": _row(frame_seconds=math.nan),
             "'features' needs 13": _row(features=[0.1] * 12)}
    for message, row in cases.items():
        path.write_text(json.dumps({"kind": "autotune-cluster-training-data", "version": 1,
                                    "rows": [_row(key="a"), row]}))
        with pytest.raises(TrainingDataError, match=rf"data\.json: row 1.*{message}"):
            read_training_data(path)
    path.write_text(json.dumps({"kind": "autotune-cluster-training-data", "version": 7,
                                "rows": []}))
    with pytest.raises(TrainingDataError, match=r"data\.json.*version 7"):
        read_training_data(path)
    assert read_training_data(tmp_path / "new.json", missing_ok=True).rows == []


def test_bad_model_files_name_the_file(files, tmp_path):
    folder, _ = files
    good = json.loads((folder / "m.json").read_text())
    (tmp_path / "shapes.json").write_text(json.dumps(good | {"x_mean": [0.0] * 3}))
    with pytest.raises(ClusterModelError, match=r"shapes\.json.*do not chain"):
        read_model(tmp_path / "shapes.json")
    (tmp_path / "other.json").write_text(json.dumps({"kind": "something"}))
    with pytest.raises(ClusterModelError, match=r"other\.json.*not an autotune cluster model"):
        read_model(tmp_path / "other.json")
