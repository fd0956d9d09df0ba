"""Performance histograms and the cluster model: pure numbers, seeded, no MPI."""

import numpy as np
import pytest

from studies.cluster_prediction.model import (
    ClusterModel,
    ClusterModelError,
    CompositingTerm,
    features,
    fit_cluster_model,
    regression_scores,
)
from studies.cluster_prediction.perf_histogram import HistogramError, PathHistogram, PerfHistogram


def test_histogram_of_times():
    h = PerfHistogram.of([1.0, 1.0, 2.0, 3.0])
    assert (h.minimum, h.maximum, h.mean) == (1.0, 3.0, 1.75)
    assert h.frequencies[0] == 0.5 and h.frequencies[-1] == 0.25
    assert len(h.features()) == 13
    with pytest.raises(HistogramError, match="no"):
        PerfHistogram.of([])
    with pytest.raises(HistogramError, match="finite"):
        PerfHistogram.of([1.0, np.nan])


def test_sampling_reproduces_the_distribution():
    rng = np.random.default_rng(1)
    times = rng.gamma(4.0, 0.01, 5000)
    h = PerfHistogram.of(times)
    drawn = h.sample(np.random.default_rng(2), 20000)
    assert drawn.min() >= h.minimum and drawn.max() <= h.maximum
    assert drawn.mean() == pytest.approx(times.mean(), rel=0.03)
    assert h.scaled(0.7).mean == pytest.approx(0.7 * h.mean)


def test_per_frame_histograms_keep_slow_frames_together():
    # all ranks slow in odd frames vs one rank always slow: same overall spread, different frames
    frames_slow = np.where(np.arange(20)[:, None] % 2 == 1, 2.0, 1.0) * np.ones((20, 4))
    rank_slow = np.ones((20, 4))
    rank_slow[:, 0] = 2.0
    rank_slow[::2, 0] = 1.0
    rank_slow[1::2, 1:] = 1.0
    a, b = PathHistogram.of(frames_slow), PathHistogram.of(rank_slow)
    assert a.frame_spread()[0] > b.frame_spread()[0]
    rng = np.random.default_rng(0)
    emulated = a.sample_frames(rng, 20, 4, per_frame=True)
    assert np.all(emulated[1::2].min(axis=1) >= emulated[::2].max(axis=1))


def test_histogram_json_round_trip_and_errors():
    p = PathHistogram.of(np.random.default_rng(0).uniform(0.1, 0.2, (6, 3)), {"volume": "x"})
    again = PathHistogram.from_dict(p.to_dict(), "h.json")
    assert again.overall == p.overall and again.ranks == 3
    bad = p.to_dict() | {"version": 99}
    with pytest.raises(HistogramError, match="h.json.*version"):
        PathHistogram.from_dict(bad, "h.json")
    zero = p.to_dict()
    zero["overall"]["samples"] = 0
    with pytest.raises(HistogramError, match="at least one sample"):
        PathHistogram.from_dict(zero, "h.json")


def _synthetic(rng, n, term):
    px = rng.choice([256.0**2, 512.0**2, 1024.0**2], n)
    ranks = rng.integers(1, 17, n)
    scale = rng.uniform(0.5, 2.0, n)
    hists = [PerfHistogram.of(rng.gamma(5.0, 0.004 * s, 200)) for s in scale]
    hf = np.array([h.features() for h in hists])
    y = hf[:, 2] * 0.9 + 0.1 * hf[:, 1] + term.seconds(px, ranks)
    return features(px, ranks, hf), y, px, ranks


def test_mlp_learns_and_transfers_to_a_faster_network():
    rng = np.random.default_rng(0)
    slow = CompositingTerm(1e-4, 1e9, 5e8)
    x, y, px, rk = _synthetic(rng, 160, slow)
    model = fit_cluster_model(x, y, px, rk, term=slow, lambdas=(1e-2, 1.0))
    xt, yt, pt, rt = _synthetic(np.random.default_rng(5), 40, slow)
    assert regression_scores(model.predict(xt, pt, rt), yt)["r2"] > 0.9
    fast = CompositingTerm(1e-5, 1e10, 5e8)
    yf = yt - slow.seconds(pt, rt) + fast.seconds(pt, rt)
    assert regression_scores(model.predict(xt, pt, rt, term=fast), yf)["r2"] > 0.9
    again = ClusterModel.from_dict(model.to_dict(), "m.json")
    np.testing.assert_allclose(again.predict(xt, pt, rt), model.predict(xt, pt, rt))


def test_bad_training_data_and_model_files():
    x = np.ones((6, 16))
    y = np.ones(6)
    y[2] = np.nan
    with pytest.raises(ClusterModelError, match="rows \\[2\\]"):
        fit_cluster_model(x, y, np.ones(6), np.ones(6))
    with pytest.raises(ClusterModelError, match="m.json.*version"):
        ClusterModel.from_dict({"kind": "autotune-cluster-model", "version": 0}, "m.json")
    with pytest.raises(ClusterModelError, match="bandwidth"):
        CompositingTerm(1e-5, 0.0, 1e8)


def test_an_ensemble_predicts_the_mean_of_its_networks_and_checks_their_shapes():
    from studies.cluster_prediction.model import Network

    rng = np.random.default_rng(2)
    nets = [Network([rng.normal(size=(16, 4)), rng.normal(size=(4, 1))],
                    [rng.normal(size=4), rng.normal(size=1)]) for _ in range(3)]
    term = CompositingTerm(1e-4, 1e9, 5e8)
    x, _, px, rk = _synthetic(np.random.default_rng(3), 5, term)

    def model(networks):
        return ClusterModel(networks, np.zeros(16), np.ones(16), 20.0, 5.0, term, 0.1, {})

    each = np.array([model([n]).predict(x, px, rk) for n in nets])
    np.testing.assert_allclose(model(nets).predict(x, px, rk), each.mean(axis=0))
    again = ClusterModel.from_dict(model(nets).to_dict(), "m.json")
    np.testing.assert_allclose(again.predict(x, px, rk), model(nets).predict(x, px, rk))
    bad = model(nets).to_dict()
    bad["networks"][1]["weights"][1] = [[0.0]] * 5  # 4 outputs feed 5 inputs
    with pytest.raises(ClusterModelError, match="m.json: layer shapes do not chain"):
        ClusterModel.from_dict(bad, "m.json")
    with pytest.raises(ClusterModelError, match="members must be >= 1"):
        fit_cluster_model(x, np.ones(5), px, rk, members=0)


@pytest.fixture
def fits_stop_short(monkeypatch):
    """Every MLP fit stops after 2 lbfgs iterations, so each fit is counted as stopped short."""
    from sklearn.neural_network import MLPRegressor

    class StopsShort(MLPRegressor):
        def __init__(self, **kw):
            super().__init__(**{**kw, "max_iter": 2})

    monkeypatch.setattr("sklearn.neural_network.MLPRegressor", StopsShort)


def test_fits_that_stop_short_are_counted_not_printed(fits_stop_short, recwarn):
    """lbfgs stopping short is a count in the model's meta, not a warning on the user's
    terminal: the cross-validation scores those fits like any other."""
    term = CompositingTerm(1e-4, 1e9, 5e8)
    x, y, px, rk = _synthetic(np.random.default_rng(0), 40, term)
    model = fit_cluster_model(x, y, px, rk, term=term, lambdas=(1.0,), members=2, folds=2)
    assert model.meta["unconverged_fits"] == 6  # 2 folds x 2 members + 2 final
    assert not [w for w in recwarn.list if "converge" in str(w.message)]


def test_lambda_is_chosen_on_the_rows_marked_held_out(fits_stop_short):
    """Where rows are marked held out, λ is scored by one split, trained on the other rows
    and scored on those (2 members: 2 fits per λ, then 2 for the refit on all), and the model
    says so; a mask of another length is refused, an empty one falls back to the folds."""
    term = CompositingTerm(1e-4, 1e9, 5e8)
    x, y, px, rk = _synthetic(np.random.default_rng(0), 40, term)
    held = np.arange(40) >= 30
    model = fit_cluster_model(x, y, px, rk, term=term, lambdas=(0.1, 1.0), members=2,
                              held_out=held)
    assert model.meta["lambda_on"] == "held-out rows" and model.meta["folds"] == 1
    assert model.meta["unconverged_fits"] == 2 * 2 + 2
    assert set(model.meta["validation_mse"]) == {0.1, 1.0}
    folds = fit_cluster_model(x, y, px, rk, term=term, lambdas=(1.0,), members=2, folds=2,
                              held_out=np.zeros(40, bool))
    assert folds.meta["lambda_on"] == "folds" and folds.meta["folds"] == 2
    with pytest.raises(ClusterModelError, match="held_out marks 39 rows, there are 40"):
        fit_cluster_model(x, y, px, rk, term=term, held_out=held[:39])
