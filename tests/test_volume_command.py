"""``autotune volume`` / ``autotune volumes`` (autotune_app/volume_command.py): a small volume on
1 and 2 ranks writes consistent outputs, a governed run prints its summary, bad input is one
line from rank 0 and exit 2 on every rank, and a non-empty output folder is never touched."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotune_app import volume_command
from autotune_app.cli import main
from autotune_app.options import MIN_CALIBRATION_FRAMES
from raytracer.mpi.launch import OVERSUBSCRIBED_ENV, launch, mpiexec_path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--volume", "marschner-lobb:24", "--width", "48", "--height", "48", "--frames", "3"]
needs_mpiexec = pytest.mark.skipif(
    mpiexec_path() is None, reason="mpiexec not installed (pip install mpich)"
)


def _launch(args: list[str], ranks: int, cwd: Path) -> subprocess.CompletedProcess[str]:
    return launch(["autotune_app.cli", "volume", *args], ranks, timeout=120,
                  cwd=cwd, env={"PYTHONPATH": str(REPO)})


def _consistent(out: Path, frames: int, ranks: int) -> dict:
    assert sorted(p.name for p in out.glob("frame_*.png")) == [
        f"frame_{i:04d}.png" for i in range(frames)]
    for name in ("frames.csv", "timings.json", "summary.json", "plot.png"):
        assert (out / name).stat().st_size > 0, name
    rows = list(csv.DictReader((out / "frames.csv").open()))
    assert [int(r["frame"]) for r in rows] == list(range(frames))
    for r in rows:
        parts = float(r["render_ms"]) + float(r["composite_ms"]) + float(r["gather_ms"])
        assert 0 < parts <= float(r["frame_ms"]) * 1.001
    timings = json.loads((out / "timings.json").read_text())
    assert timings["ranks"] == ranks and len(timings["frames"]) == frames
    for f in timings["frames"]:
        assert [r["rank"] for r in f["ranks"]] == list(range(ranks))
        assert all(len(r["stages"]) == len(f["ranks"][0]["stages"]) for r in f["ranks"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ranks"] == ranks and summary["frames"] == frames
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp folder
    return summary


@needs_mpiexec
def test_one_rank_fixed_knobs(tmp_path):
    done = _launch([*SMALL, "--step", "0.5", "--scale", "0.5", "-o", "out", "--json"], 1,
                   tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _consistent(tmp_path / "out", 3, 1)
    assert summary["settings"] == {"step": 0.5, "image_scale": 0.5, "ert_threshold": 1.0}
    printed = json.loads(done.stdout)
    assert printed["frames"] == 3 and printed["output"] == "out"
    row = next(csv.DictReader((tmp_path / "out" / "frames.csv").open()))
    assert (row["render_width"], row["render_height"]) == ("24", "24")


@needs_mpiexec
def test_two_ranks_governed_prints_its_summary(tmp_path):
    done = _launch([*SMALL, "--algorithm", "2-3-swap", "--target-ms", "40",
                    "--calibration-frames", str(MIN_CALIBRATION_FRAMES), "-o", "out"], 2, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = _consistent(tmp_path / "out", 3, 2)
    g = summary["governed"]
    assert g["target_ms"] == 40 and g["controller"] == "feedforward"
    assert 0 < g["mean_ssim"] <= 1 and g["calibration_seconds"] > 0
    assert "calibrated in" in done.stderr
    assert "mean_abs_error_vs_target" in done.stdout and "target 40 ms" in done.stdout
    rows = list(csv.DictReader((tmp_path / "out" / "frames.csv").open()))
    assert all(float(r["predicted_ms"]) > 0 and 0 < float(r["ssim"]) <= 1 for r in rows)
    # the frames a rank did not run through: counted from the rows' column
    assert all(float(r["descheduled_ms"]) >= 0 for r in rows)
    assert all((r["descheduled"] == "1") == (float(r["descheduled_ms"]) > 1) for r in rows)
    assert g["frames_a_rank_was_descheduled"] == sum(r["descheduled"] == "1" for r in rows)


@needs_mpiexec
def test_bad_input_is_one_line_and_exit_2_on_every_rank(tmp_path):
    (tmp_path / "bad.json").write_text('{"colors": [[0, 1, 1, 1]]}')
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    cases = {
        "nosuch": (["--volume", "nosuch", "-o", "a"], "unknown volume 'nosuch'"),
        "tf": ([*SMALL, "--tf", "bad.json", "-o", "b"], "bad.json: missing key 'opacities'"),
        "out": ([*SMALL, "-o", "mine"], "--force"),
    }
    procs = {}
    for name, (args, _) in cases.items():  # three jobs side by side: mostly start-up time
        cmd = [mpiexec_path(), "-n", "2", sys.executable, "-m",
               "autotune_app.cli", "volume", *args]
        env = {**os.environ, "PYTHONPATH": str(REPO), **OVERSUBSCRIBED_ENV}
        procs[name] = subprocess.Popen(cmd, cwd=tmp_path, env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       start_new_session=True)
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=90)
            assert proc.returncode == 2, (name, out, err)
            assert out == "" and "Traceback" not in err, (name, err)
            assert err.count("\n") == 1 and err.startswith("autotune volume: error: "), err
            assert cases[name][1] in err, err
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "mine"]


def test_volumes_lists_shipped_and_procedural(capsys):
    assert main(["volumes", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    names = [v["name"] for v in listing["volumes"]]
    assert "bonsai" in names and "marschner-lobb[:N]" in names
    assert "bonsai" in listing["transfer_functions"]


def test_argument_errors_are_printed_by_rank_0_only(capsys, monkeypatch):
    monkeypatch.setenv("PMI_RANK", "1")
    with pytest.raises(SystemExit) as exc:
        main(["volume", "--scale", "2"])
    assert exc.value.code == 2 and capsys.readouterr().err == ""
    monkeypatch.setenv("PMI_RANK", "0")
    with pytest.raises(SystemExit) as exc:
        main(["volume", "--scale", "2"])
    assert exc.value.code == 2 and "--scale: must be in (0, 1]" in capsys.readouterr().err
    assert volume_command.launcher_rank() == 0


def test_too_few_calibration_frames_are_refused_before_anything_renders(capsys):
    """Too few frames to fit the model: one argument error, not a fit error after rendering."""
    with pytest.raises(SystemExit) as exc:
        main(["volume", "--volume", "bonsai", "--target-ms", "50", "--calibration-frames", "3"])
    assert exc.value.code == 2
    assert f"--calibration-frames: must be >= {MIN_CALIBRATION_FRAMES}" in capsys.readouterr().err


def test_target_share_and_target_ms_are_exclusive(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "autotune_app.cli", "volume", "--volume", "marschner-lobb:24",
         "--frames", "1", "--width", "32", "--height", "32", "--target-ms", "50",
         "--target-share", "0.5", "-o", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--target-share or --target-ms" in done.stderr
    assert not (tmp_path / "out").exists()
