"""The ``autotune`` command: render writes images and figures, errors are one clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from autotune_app.cli import main


def test_render_writes_png_and_json(tmp_path, capsys):
    out = tmp_path / "dragon.png"
    rc = main(["render", "--scene", "dragon-small", "--width", "64", "--height", "36",
               "--ao-rays", "2", "--shadows", "-o", str(out), "--json", "--counters"])
    assert rc == 0
    figures = json.loads(capsys.readouterr().out)
    assert set(figures["phase_ms"]) == {"primary", "shadow", "ao", "shade"}
    assert figures["total_ms"] > 0 and figures["counters"]["primary"]["nodes_per_pixel"] > 0
    image = np.asarray(Image.open(out))
    assert image.shape == (36, 64, 4) and image[..., :3].std() > 5
    assert not list(tmp_path.glob(".*tmp"))  # nothing half-written left beside it


def test_render_table_output(capsys):
    assert main(["render", "--scene", "spheres", "--width", "32", "--height", "18",
                 "--no-shadows", "--ao-rays", "0"]) == 0
    out = capsys.readouterr().out
    assert "phase_ms" in out and "primary" in out and "shadow" not in out.split("phase_ms")[1]


@pytest.mark.parametrize("argv, message", [
    (["render", "--scene", "teapot"], "unknown scene 'teapot'"),
    (["render", "--scene", "dragon-small", "--device", "no-such-gpu"], "no OpenCL device"),
    (["render", "--scene", "dragon-small", "-o", "/no/such/folder/x.png", "--width", "8",
      "--height", "8"], "does not exist"),
])
def test_errors_are_one_line_with_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv, message", [
    (["render", "--width", "0"], "must be >= 1"),
    (["render", "--ao-rays", "99"], "--ao-rays: must be a number in 0..64"),
    (["demo", "--target-ms", "-5"], "--target-ms: must be a finite positive number"),
])
def test_bad_values_are_rejected_by_the_parser(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_devices_lists_the_default(capsys):
    assert main(["devices", "--json"]) == 0
    devices = json.loads(capsys.readouterr().out)
    assert sum(d["default"] for d in devices) == 1


def test_demo_writes_frames_plot_and_report(tmp_path, capsys):
    """Both halves: the tuned ray tracer, then the governed volume renderer on 2 MPI ranks
    that the demo launches itself into the same report."""
    out = tmp_path / "demo"
    rc = main(["demo", "--scene", "dragon-small", "--frames", "3", "--width", "64",
               "--height", "36", "--target-ms", "20", "--out", str(out),
               "--volume", "marschner-lobb:24", "--volume-ranks", "2", "--volume-frames", "3",
               "--volume-size", "32", "--volume-target-ms", "60"])
    assert rc == 0
    assert len(list((out / "frames").glob("*.png"))) == 3
    assert (out / "plot.png").stat().st_size > 0
    figures = json.loads((out / "figures.json").read_text())
    assert figures["summary"]["frames"] == 3 and len(figures["per_frame"]) == 3
    report = (out / "report.txt").read_text()
    assert "mean |frame - target|" in report
    quality = figures["summary"]["image_quality"]  # issue 12: not by dropping to the floor
    assert quality["frames"] == [0, 1, 2] and 0 < quality["mean_ssim"] <= 1
    assert "PSNR / SSIM vs the full-quality frame" in report
    assert "marschner-lobb:24 on 2 MPI ranks" in report
    volume = json.loads((out / "volume" / "summary.json").read_text())
    assert volume["ranks"] == 2 and volume["governed"]["target_ms"] == 60
    assert len(list((out / "volume").glob("frame_*.png"))) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["demo"]  # no work folder left behind
