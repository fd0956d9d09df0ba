"""``autotune bench kernel-models`` (the kernel-model paper's experiment) on synthetic runs.

Features, splits, tables and goals on synthetic runs; one tiny OpenCL run that checks every
kernel's output against numpy. The paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A
Comparison of GPU Execution Time Prediction using Machine Learning and Analytical Modeling"."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune_app.cli import BENCHMARKS
from benchmarks.studies.kernel_models import opencl_timing
from benchmarks.studies.kernel_models.command import main, result_name
from benchmarks.studies.kernel_models.launches import (
    MATRIX_MULTIPLY,
    MSA_THREADS,
    TWO_D,
    DeviceFacts,
    Run,
    feature_matrix,
    features,
    launch_shape,
    occupancy,
)
from benchmarks.studies.kernel_models.predictions import (
    DEVICE_SPLIT_DEVICES,
    bsp_predictions,
    bsp_unit_seconds,
    default_split,
    folds,
    holdout_key,
    lambda_run,
    learned_predictions,
)
from benchmarks.studies.kernel_models.tables import (
    ALL_APPROACHES,
    BAND,
    band_share,
    bsp_regular,
    evaluate,
    goals,
    table,
    table_vi,
)
from common.atomic_files import OutputError
from raytracer.device.choice import DeviceError, choose_device
from studies.kernel_models.bsp import SEED_KERNELS
from studies.kernel_models.learned_comparators import APPROACHES, MIN_ROWS, SEED_FEATURES

DEV = DeviceFacts("test cpu", "test", cores=4, clock_mhz=2000.0, bandwidth_gbs=20.0,
                  simd_width=16)
OTHER = DeviceFacts("other cpu", "other", cores=8, clock_mhz=3000.0, bandwidth_gbs=40.0,
                    simd_width=8)
DEVICES = {"test": DEV, "other": OTHER}


def synthetic_runs(noise: float = 0.0, devices: tuple[str, ...] = ("test",)) -> list[Run]:
    """Runs whose seconds are BSP's own prediction with lambda 2 (times ``1 + noise``)."""
    runs = []
    for device in devices:
        for kernel in SEED_KERNELS:
            sizes = (64, 128, 256) if kernel in TWO_D else (1 << 14, 1 << 15, 1 << 16)
            for n in sizes:
                for block in (64, 256):
                    unit = bsp_unit_seconds(Run(device, kernel, n, block, 1.0), DEVICES[device])
                    runs.append(Run(device, kernel, n, block, unit / 2.0 * (1 + noise)))
    return runs


def test_thirteen_features_in_the_seeds_order_all_positive():
    for kernel in SEED_KERNELS:
        n = 256 if kernel in TWO_D else 1 << 16
        f = features(kernel, n, 64, DEV)
        assert tuple(f) == SEED_FEATURES
        assert all(v > 0 and math.isfinite(v) for v in f.values())


def test_vadd_features_by_hand():
    f = features("vAdd", 1 << 16, 256, DEV)
    # two coalesced loads per item: a warp of 16 floats is one 64-byte line, so 2/16 per item
    assert f["total_load_gm"] == 1 + (1 << 16) * 2 / 16
    assert f["total_store_gm"] == 1 + (1 << 16) / 16
    assert f["total_load_sm"] == 1 and f["flops_sp"] == 1 + (1 << 16)
    assert (f["grid_size"], f["threads"], f["block_size"]) == (256, 1 << 16, 256)
    assert f["achieved_occupancy"] == 1.0


def test_uncoalesced_twins_cost_more_transactions():
    for u, c in (("MMGU", "MMGC"), ("MMSU", "MMSC"), ("MAU", "MAC")):
        fu, fc = features(u, 256, 64, DEV), features(c, 256, 64, DEV)
        assert fu["total_load_gm"] > fc["total_load_gm"]
        assert fu["total_store_gm"] > fc["total_store_gm"]
        assert fu["flops_sp"] == fc["flops_sp"]


def test_launch_shapes_and_bad_blocks():
    assert launch_shape("MMSC", 64, 256) == ((64, 64), (16, 16))
    assert launch_shape("MSA", 1 << 18, 128) == ((MSA_THREADS,), (128,))
    assert launch_shape("dotP", 1024, 64) == ((1024,), (64,))
    with pytest.raises(ValueError, match="square"):
        launch_shape("MAC", 64, 128)
    with pytest.raises(ValueError, match="divide"):
        launch_shape("vAdd", 1000, 64)
    assert occupancy(6, 4) == 6 / 8 and occupancy(8, 4) == 1.0


def test_leave_one_size_out_holds_out_every_block_of_one_size():
    runs = synthetic_runs()
    got = folds(runs, "size")
    assert len(got) == len(SEED_KERNELS) * 3
    for train, test in got:
        assert len({runs[i].n for i in test}) == 1
        assert len({runs[i].kernel for i in train + test}) == 1
        assert runs[test[0]].n not in {runs[i].n for i in train}
        assert len(test) == 2 and len(train) == 4
    tested = sorted(i for _, test in got for i in test)
    assert tested == list(range(len(runs)))  # every run predicted exactly once


def test_leave_one_device_out_and_too_few_rows():
    runs = synthetic_runs(devices=("test", "other"))
    for train, test in folds(runs, "device"):
        assert {runs[i].device for i in test}.isdisjoint(runs[i].device for i in train)
    few = [r for r in runs if r.n in (64, 1 << 14)]  # 2 rows per kernel and device
    assert len([r for r in few if r.kernel == "vAdd" and r.device == "test"]) < MIN_ROWS
    assert folds(few, "device") == []
    with pytest.raises(ValueError, match="split"):
        holdout_key("kernel")


def test_bsp_is_exact_when_times_follow_it_and_leaves_the_lambda_run_out():
    runs = synthetic_runs()
    pred, lambdas = bsp_predictions(runs, DEVICES)
    assert np.isnan(pred).sum() == len(SEED_KERNELS)  # one lambda run per kernel
    for kernel, lam in lambdas["test"].items():
        assert lam == pytest.approx(2.0), kernel
    ok = np.isfinite(pred)
    np.testing.assert_allclose(pred[ok], np.array([r.seconds for r in runs])[ok])
    fit = lambda_run(runs, [i for i, r in enumerate(runs) if r.kernel == "MAC"])
    assert (runs[fit].n, runs[fit].block) == (128, 64)  # middle size, smallest block


def test_learned_models_predict_every_held_out_run():
    runs = synthetic_runs()
    preds, clipped = learned_predictions(runs, feature_matrix(runs, DEVICES), "size")
    assert set(preds) == set(APPROACHES) == set(clipped)
    for p in preds.values():
        assert np.all(np.isfinite(p)) and np.all(p > 0)


def test_an_extrapolating_fit_is_held_to_its_training_range_and_says_so():
    """LR on nearly collinear log features (sizes and loads both growing with n) fitted on
    small sizes: far outside them it would predict astronomical times; held to the training
    range widened by its width, it counts the predictions it held."""
    from studies.kernel_models.learned_comparators import LogRegressor

    rng = np.random.default_rng(1)
    n = np.arange(1.0, 9.0)
    x = np.column_stack([2 ** n, 2 ** n * (1 + 1e-6 * rng.standard_normal(n.size)), 2 ** (2 * n)])
    seconds = 1e-6 * 2 ** n
    model = LogRegressor("LR").fit(x, seconds)
    far = np.array([[2.0 ** 200, 2.0 ** 200 * 1.5, 2.0 ** 100]])
    predicted = model.predict(far)
    lo, hi = np.log2(seconds.min()), np.log2(seconds.max())
    assert np.isfinite(predicted).all() and np.log2(predicted[0]) <= hi + (hi - lo) + 1e-9
    assert model.clipped == 1
    assert model.predict(x[:3]).shape == (3,) and model.clipped == 0


def test_tables_by_hand():
    runs = [Run("test", "vAdd", n, 64, 1.0) for n in (1, 2, 3, 4)]
    preds = {"BSP": np.array([1.0, 2.0, np.nan, 1.0]), "LR": np.full(4, np.nan)}
    v = table(runs, preds, lambda r: r.device)["test"]
    assert v["BSP"]["n"] == 3
    assert v["BSP"]["accuracy_mean"] == pytest.approx(4 / 3)
    assert v["BSP"]["accuracy_sd"] == pytest.approx(np.std([1, 2, 1]))
    assert v["BSP"]["nmse"] == pytest.approx((1 / 3) / (4 / 3 * 1.0))
    assert v["LR"]["n"] == 0 and math.isnan(v["LR"]["nmse"])
    assert table_vi(runs, preds)["vAdd"]["BSP"] == pytest.approx(0.25)
    assert band_share(preds["BSP"], np.ones(4), BAND) == pytest.approx(2 / 3)


def test_bsp_regular_leaves_msa_out_and_splits_by_lambdas_block():
    runs = [Run("test", "MSA", 1, 64, 1.0), Run("test", "vAdd", 1, 64, 1.0),
            Run("test", "vAdd", 2, 64, 1.0), Run("test", "vAdd", 2, 256, 1.0)]
    reg = bsp_regular(runs, np.array([5.0, np.nan, 1.1, 3.0]))
    assert reg["at_lambda_block"]["n"] == 1 and reg["at_lambda_block"]["share_in_band"] == 1.0
    assert reg["all_blocks"]["n"] == 2 and reg["all_blocks"]["share_in_band"] == 0.5


def figures_with(share: float, lr_mean: float) -> dict:
    row = {a: {"accuracy_mean": 1.0} for a in APPROACHES}
    row["LR"] = {"accuracy_mean": lr_mean}
    return {"bsp_regular": {"at_lambda_block": {"share_in_band": share}},
            "table_v": {"test": row}, "split": "size"}


def test_goals_from_a_synthetic_figures_dict():
    g = goals(figures_with(0.95, 1.0))
    assert set(g) == {"bsp_regular_share_in_0.8_1.2", *(f"test_{a}_mean_accuracy"
                                                          for a in APPROACHES)}
    assert all(v["met"] for v in g.values())
    assert all({"value", "goal", "met", "what"} <= set(v) for v in g.values())
    bad = goals(figures_with(0.5, 1.7))
    assert not bad["bsp_regular_share_in_0.8_1.2"]["met"]
    assert not bad["test_LR_mean_accuracy"]["met"] and bad["test_RF_mean_accuracy"]["met"]
    assert not goals(figures_with(math.nan, math.nan))["test_LR_mean_accuracy"]["met"]


def test_a_device_split_needs_devices_that_vary_in_training():
    assert default_split(1) == default_split(2) == "size"
    assert default_split(DEVICE_SPLIT_DEVICES) == "device"
    two = figures_with(0.95, 1e6)
    two["table_v"]["other"] = two["table_v"]["test"]
    two["split"] = "device"
    g = goals(two)
    assert g["test_LR_mean_accuracy"]["met"] is None
    assert "do not vary" in g["other_RF_mean_accuracy"]["not_judged"]
    assert g["bsp_regular_share_in_0.8_1.2"]["met"]  # BSP is fitted per device: judged
    two["split"] = "size"
    assert goals(two)["test_LR_mean_accuracy"]["met"] is False


def test_a_saved_result_names_its_part_and_runtimes():
    figures = {"devices": {"pocl": {}, "intel-cpu": {}}}
    assert result_name("seed003", False, figures) == "kernel_models_seed003_intel-cpu+pocl.json"
    assert result_name("own", True, {}) == "kernel_models_own_quick.json"


def test_the_command_is_registered():
    assert BENCHMARKS["kernel-models"] == "benchmarks.studies.kernel_models"


def msa_reference(x: np.ndarray, threads: int) -> np.ndarray:
    """The five numbers per interval that the MSA kernel writes."""
    out = []
    for part in x.reshape(threads, -1).astype(np.int64):
        prefix = np.cumsum(part)
        suffix = np.cumsum(part[::-1])
        best = max(part[i:j].sum() for i in range(len(part)) for j in range(i + 1, len(part) + 1))
        out.append([prefix[-1], prefix.max(), suffix.max(), best, part.max()])
    return np.array(out)


def expected(kernel: str, host: list[np.ndarray], block: int) -> np.ndarray:
    if kernel in MATRIX_MULTIPLY:
        return (host[0].astype(np.float64) @ host[1]).ravel()
    if kernel == "dotP":
        return (host[0] * host[1]).astype(np.float64).reshape(-1, block).sum(axis=1)
    if kernel == "MSA":
        return msa_reference(host[0], MSA_THREADS).ravel()
    return (host[0] + host[1]).ravel()


def test_every_kernel_computes_its_result_and_the_pipeline_runs():
    try:
        info, device = choose_device()
    except DeviceError as exc:
        pytest.skip(f"no OpenCL device builds: {exc}")
    bench = opencl_timing.KernelBench(device)
    runs = []
    for kernel in SEED_KERNELS:
        sizes = (32, 64, 128) if kernel in TWO_D else (2 * MSA_THREADS, 4 * MSA_THREADS,
                                                       8 * MSA_THREADS)
        for n in sizes:
            host = bench.inputs(kernel, n)
            for block in (16, 64):
                seconds, out = bench.launch(kernel, n, block, host, repeats=1)
                assert seconds > 0
                runs.append(Run(info.runtime, kernel, n, block, seconds))
                if n == sizes[0]:
                    np.testing.assert_allclose(out, expected(kernel, host, block), rtol=1e-4,
                                               err_msg=f"{kernel} block {block}")
    facts = {info.runtime: DeviceFacts(info.name, info.runtime, info.compute_units,
                                       info.clock_mhz or 1000.0, 10.0, info.simd_width)}
    figures, preds = evaluate(runs, facts, {info.runtime: None}, "size")
    assert set(figures["table_v"][info.runtime]) == set(ALL_APPROACHES)
    assert figures["table_v_mmsc"][info.runtime]["LR"]["n"] == 3 * 2  # MMSC's runs only
    assert np.all(np.isnan(preds["HK"]))  # no profile given
    regular = figures["bsp_regular"]
    assert regular["all_blocks"]["n"] == len(runs) - 2 * 3 - 8  # MSA and the lambda runs out
    assert regular["at_lambda_block"]["n"] == 8 * 2  # the other two sizes at block 16
    assert len(figures["runs"]) == len(runs) and "goals" in figures


def test_plots_into_a_non_empty_folder_are_refused_before_measuring(tmp_path, monkeypatch):
    (tmp_path / "mine.txt").write_text("keep")

    def measured(*args, **kwargs):
        raise AssertionError("measured before refusing the folder")

    monkeypatch.setattr(opencl_timing, "measure", measured)
    with pytest.raises(OutputError, match="--force"):
        main(["--quick", "--plots", str(tmp_path)])
    assert [p.name for p in tmp_path.iterdir()] == ["mine.txt"]
