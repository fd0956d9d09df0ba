"""``autotune bench gpu --device cpu --quick``: every step of the GPU check but the
NVIDIA-only ones runs on a CPU device at tiny sizes, so the check is ready when a GPU is lent."""

from __future__ import annotations

import argparse
import json

import pytest

from benchmarks.governed import gpu
from benchmarks.harness import run_record
from raytracer.device.choice import DeviceInfo


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu-check") / "out"
    assert gpu.main(["--device", "cpu", "--quick", "--out", str(out), "--json"]) == 0
    return json.loads((out / "results.json").read_text()), out


def test_every_step_runs_on_a_cpu_device(results):
    figures, out = results
    steps = figures["steps"]
    assert list(steps) == ["platforms", "device", "build", "image", "ptx", "calibration",
                           "heldout", "tuned_192x108", "volume"]
    failed = {k: v.get("error") for k, v in steps.items() if v["status"] != "done"}
    assert not failed
    assert steps["platforms"]["devices"]
    assert steps["image"]["agrees"] is True
    assert (out / "image_device.png").is_file() and (out / "image_cpu_reference.png").is_file()
    assert "not an NVIDIA device" in steps["ptx"]["status_note"]
    assert (out / "calibrated_profile.json").is_file()
    assert steps["heldout"]["errors"]["frame"]["n"] == steps["heldout"]["frames"] > 0
    tuned = steps["tuned_192x108"]
    assert tuned["frames"] == 6 and tuned["overlap_probe"] is False
    assert set(tuned["rays_per_second"]) == {"primary", "shadow", "ao"}
    assert all(r["mrays_per_s"] > 0 for r in tuned["rays_per_second"].values())
    assert steps["volume"]["summary"]["frames"] == 4


def test_the_results_name_the_commit_that_ran(results, monkeypatch):
    figures, _ = results
    assert figures["run"]["commit"] and "unknown" not in figures["run"]["commit"]
    monkeypatch.setenv(run_record.COMMIT_ENV, "abc123")
    assert run_record.checkout_commit() == "abc123"


def test_goals_are_not_run_on_a_cpu(results):
    figures, _ = results
    assert figures["goals"] and all(g["met"] is None and "no GPU" in g["not_run"]
                                    for g in figures["goals"].values())


def test_a_step_that_would_not_fit_is_skipped_and_says_why(tmp_path):
    check = gpu.Check(tmp_path, budget_s=1.0, quick=False)
    assert check.step("calibration", lambda: {"never": "run"}) is None
    entry = json.loads((tmp_path / "results.json").read_text())["steps"]["calibration"]
    assert entry["status"] == "skipped" and "budget" in entry["why"]


def test_a_step_asked_away_is_skipped(tmp_path):
    check = gpu.Check(tmp_path, budget_s=100.0, quick=True, skip=frozenset({"volume"}))
    assert check.step("volume", lambda: {"never": "run"}) is None
    entry = json.loads((tmp_path / "results.json").read_text())["steps"]["volume"]
    assert entry == {"status": "skipped", "why": "asked (--skip)"}
    assert gpu.step_names("image, ptx") == ["image", "ptx"]
    with pytest.raises(argparse.ArgumentTypeError, match="no step imag "):
        gpu.step_names("imag")


def test_a_failing_step_keeps_the_others(tmp_path):
    check = gpu.Check(tmp_path, budget_s=100.0, quick=True)
    check.step("device", lambda: {"ok": 1})

    def broken() -> dict:
        raise RuntimeError("driver said no")

    check.step("build", broken)
    steps = json.loads((tmp_path / "results.json").read_text())["steps"]
    assert steps["device"]["status"] == "done" and steps["device"]["ok"] == 1
    assert steps["build"]["status"] == "failed" and "driver said no" in steps["build"]["error"]


def test_gpu_goals_read_the_steps():
    steps = {"heldout": {"errors": {"frame": {"mean": 0.08}}},
             "tuned_1920x1080": {"mean_abs_error_vs_target": 0.05,
                                 "p95_abs_error_vs_target": 0.07},
             "image": {"agrees": True}}
    goals = gpu.goals({"steps": steps, "check_seconds": 300.0}, on_gpu=True)
    assert goals["check_seconds"]["met"] and goals["heldout_frame_mean_1080p"]["met"]
    assert goals["tuned_mean_1080p"]["met"] is False and goals["tuned_p95_1080p"]["met"]
    assert goals["image_equals_cpu_reference"]["met"] is True
    assert gpu.goals({"steps": {}, "check_seconds": 900.0}, True)["check_seconds"]["met"] is False


def test_results_go_to_a_folder_named_for_the_device():
    info = DeviceInfo(0, 0, "NVIDIA CUDA", "NVIDIA H200", "GPU", 132, 1980, 143000, "580",
                      32, "nvidia")
    assert gpu.machine_key(info) == "nvidia-h200"
    pocl = DeviceInfo(0, 0, "Portable Computing Language", "cpu-znver4-AMD EPYC", "CPU", 2,
                      2600, 1000, "3.0", 1, "pocl")
    assert gpu.machine_key(pocl) == "pocl-cpu-znver4-amd-epyc"
