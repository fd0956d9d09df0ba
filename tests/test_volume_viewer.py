"""``autotune view --volume``: the distributed volume renderer in the viewer (issue 11 item 3).

A small volume at 64x64 with few calibration frames: headless in this process (one rank) and
on 2 ranks through ``raytracer.mpi.launch.launch``; a bad volume is one line and exit 2 on every
rank; under Xvfb a real '-' key press lowers the target on every rank and Esc ends every rank."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from test_viewer import _start_xvfb, recording

from autotune_app.options import MIN_CALIBRATION_FRAMES
from autotune_app.viewer import add_view_parser, run_view
from raytracer.mpi.launch import OVERSUBSCRIBED_ENV, launch, mpiexec_path

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--volume", "marschner-lobb:24", "--width", "64", "--height", "64",
         "--calibration-frames", str(MIN_CALIBRATION_FRAMES), "--target-ms", "40"]
needs_mpiexec = pytest.mark.skipif(
    mpiexec_path() is None, reason="mpiexec not installed (pip install mpich)"
)
pytestmark = pytest.mark.filterwarnings("ignore::autotune.AutotuneWarning")


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_view_parser(parser.add_subparsers())
    return parser.parse_args(["view", *SMALL, *argv])


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **OVERSUBSCRIBED_ENV, **extra}
    if "DISPLAY" not in extra:
        env.pop("DISPLAY", None)
    return env


def _complete(record: Path, frames: int | None = None, size: tuple[int, int] = (64, 64)
              ) -> tuple[list[dict], dict]:
    """The record folder holds every frame's PNG, its CSV row and camera, and run.json."""
    rows = list(csv.DictReader((record / "frames.csv").open()))
    n = len(rows) if frames is None else frames
    assert [int(r["frame"]) for r in rows] == list(range(n))
    assert sorted(p.name for p in (record / "frames").glob("*.png")) == [
        f"{i:05d}.png" for i in range(n)]
    assert len(json.loads((record / "camera_path.json").read_text())["cameras"]) == n
    run = json.loads((record / "run.json").read_text())
    assert run["frames"] == n and run["volume"] == "marschner-lobb:24"
    for r in rows:
        assert float(r["measured_ms"]) > 0
        # PI has no model, and knobs held with tuning off are not priced
        assert float(r["predicted_ms"]) > 0 or r["controller"] == "pi" or r["tuning"] == "0"
        assert 0.25 <= float(r["sampling_rate"]) <= 2 and 0.5 <= float(r["image_scale"]) <= 1
    image = np.asarray(Image.open(record / "frames" / f"{n - 1:05d}.png").convert("RGB"))
    assert image.shape == (size[1], size[0], 3) and image.std() > 10  # the volume, not blank
    return rows, run


def _summary_printed(out: str) -> None:
    assert "autotune view: marschner-lobb:24" in out
    assert "mean |frame - target| / target" in out and "mean sampling rate chosen" in out


def test_headless_one_process_with_keys(tmp_path: Path, monkeypatch, capsys) -> None:
    import glfw

    from autotune_app.viewer import main_loop

    monkeypatch.delenv("DISPLAY", raising=False)
    keys = {2: [glfw.KEY_T], 4: [glfw.KEY_T, glfw.KEY_3, glfw.KEY_EQUAL]}
    step = main_loop.Viewer.step

    def scripted_step(viewer: main_loop.Viewer) -> bool:
        for key in keys.get(viewer.frame_index, []):
            viewer.key_callback(None, key, 0, glfw.PRESS, 0)
        return step(viewer)

    monkeypatch.setattr(main_loop.Viewer, "step", scripted_step)
    record = tmp_path / "rec"
    assert run_view(_args("--headless", "--frames", "5", "--record", str(record))) == 0
    captured = capsys.readouterr()
    _summary_printed(captured.out)
    assert "calibrated in" in captured.err
    rows, run = _complete(record, 5)
    assert run["ranks"] == 1 and run["headless"] is True and run["ranks_agree"]
    assert [r["tuning"] for r in rows] == ["1", "1", "0", "0", "1"]
    knobs = [tuple(r[k] for k in ("step", "image_scale", "ert_threshold")) for r in rows]
    assert knobs[1] == knobs[2] == knobs[3]  # T held the last tuned knobs
    assert [r["controller"] for r in rows] == ["feedforward"] * 4 + ["pi"]
    assert float(rows[4]["target_ms"]) == pytest.approx(50) and rows[3]["target_ms"] == "40.0"


@needs_mpiexec
def test_headless_two_ranks(tmp_path: Path) -> None:
    done = launch(
        ["autotune_app.cli", "view", *SMALL, "--headless", "--frames", "3", "--record", "rec"],
        2, timeout=240, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "DISPLAY": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    _summary_printed(done.stdout)
    assert "2 ranks" in done.stdout and done.stdout.count("autotune view:") == 1
    _, run = _complete(tmp_path / "rec", 3)
    assert run["ranks"] == 2 and run["ranks_agree"]
    assert [s["rank"] for s in run["ranks_at_end"]] == [0, 1]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder


@needs_mpiexec
def test_bad_volume_is_one_line_and_exit_2_on_every_rank(tmp_path: Path) -> None:
    cmd = [mpiexec_path(), "-n", "2", sys.executable, "-m", "autotune_app.cli",
           "view", "--volume", "nosuch", "--headless", "--frames", "2", "--record", "rec"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, (out, err)
    assert out == "" and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("autotune view: error: ") and "unknown volume 'nosuch'" in err
    assert list(tmp_path.iterdir()) == []  # nothing recorded


@needs_mpiexec
def test_real_minus_key_lowers_the_target_on_every_rank(tmp_path: Path) -> None:
    if shutil.which("xdotool") is None:
        pytest.skip("xdotool is not installed (apt-get install xdotool)")
    xvfb, display = _start_xvfb()
    try:
        _minus_key_run(display, tmp_path)
    finally:
        xvfb.terminate()
        xvfb.wait()


def _minus_key_run(display: str, tmp_path: Path) -> None:
    record = tmp_path / "rec"
    env = _env(DISPLAY=display)
    cmd = [mpiexec_path(), "-n", "2", sys.executable, "-m", "autotune_app.cli",
           "view", *SMALL, "--record", str(record)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)

    def wait_for(check, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not check():
            if proc.poll() is not None or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(f"viewer exited or stalled: {proc.communicate()[1][-2000:]}")
            time.sleep(0.05)

    def shots() -> int:
        return sum(len(list(f.glob("screenshot_*.png")))
                   for f in [record, *tmp_path.glob(".rec.*.tmp")])

    def xdotool(*argv: str) -> None:
        subprocess.run(["xdotool", *argv], env=env, check=True)

    try:
        wait_for(lambda: recording(record, "frames/00000.png"), 180)
        xdotool("mousemove", "20", "20")  # focus
        xdotool("key", "minus")
        xdotool("key", "p")
        wait_for(lambda: shots() == 1, 60)
        xdotool("search", "--name", "autotune view", "windowsize", "96", "72")
        xdotool("key", "p")  # handled with the resize, in the same poll
        wait_for(lambda: shots() == 2, 60)
        xdotool("key", "Escape")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-3000:]
    assert "2 ranks" in out and "target 32.0 ms between shown frames at the end" in out
    rows, run = _complete(record, size=(96, 72))
    assert float(rows[0]["target_ms"]) == 40 and float(rows[-1]["target_ms"]) == pytest.approx(32)
    assert (rows[0]["width"], rows[-1]["width"], rows[-1]["height"]) == ("64", "96", "72")
    assert run["headless"] is False and run["ranks_agree"]
    held = float(rows[-1]["render_target_ms"])  # 32 ms less what the rest of a frame takes
    assert 0.25 * 32 <= held <= 32
    assert [s["target_ms"] for s in run["ranks_at_end"]] == pytest.approx([held, held])
    assert [(s["width"], s["height"]) for s in run["ranks_at_end"]] == [(96, 72)] * 2
