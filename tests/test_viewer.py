"""The viewer end to end: headless runs in-process (EGL); window runs under a private Xvfb in a
subprocess (GLX and EGL must not share a process); bad input gives one line and exit code 2."""

import argparse
import csv
import json
import os
import select
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from autotune_app.viewer import add_view_parser, run_view
from autotune_app.viewer.overlay import (
    GREY,
    WHITE,
    FontAtlas,
    FrameHistory,
    PlotPoint,
    font_size_for,
    graph_scale,
    graph_vertices,
    polyline_vertices,
)
from raytracer.camera import orbit_path, save_path

ROOT = Path(__file__).resolve().parents[1]
SCENE = "spheres"
SIZE = (320, 180)
TARGET_MS = "30"  # tight on a CPU: the tuner keeps frames cheap, so the tests stay quick
pytestmark = pytest.mark.filterwarnings("ignore::autotune.AutotuneWarning")  # target unreachable


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_view_parser(parser.add_subparsers())
    return parser.parse_args(
        ["view", "--scene", SCENE, "--width", str(SIZE[0]), "--height", str(SIZE[1]),
         "--target-ms", TARGET_MS, *argv]
    )


def _rows(record: Path) -> list[dict]:
    with open(record / "frames.csv") as f:
        return list(csv.DictReader(f))


def _image(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"), np.float64)


def _shows_scene(image: np.ndarray) -> bool:
    """Not blank: strong contrast and many distinct colours."""
    colours = len(np.unique(image.reshape(-1, 3).astype(np.uint8), axis=0))
    return image.std() > 20 and colours > 50


def _graph_area(image: np.ndarray) -> np.ndarray:
    """The bottom-left region where the overlay draws the frame-time graph."""
    h, w = image.shape[:2]
    return image[h - h // 4 : h - 6, 6 : w // 2]


def _path_file(tmp_path: Path, frames: int, still: bool = False) -> Path:
    from raytracer.mesh.scene import load_scene

    scene = load_scene(SCENE)
    cams = orbit_path(scene.center, np.asarray(scene.camera.eye), frames, turns=0.05)
    if still:
        cams = [scene.camera] * frames
    path = tmp_path / "path.json"
    save_path(cams, path)
    return path


# ---- overlay layout and history (no GL) -------------------------------------------------------


def test_history_keeps_the_last_frames_in_order_and_measures_model_error() -> None:
    history = FrameHistory(length=4)
    for i in range(6):
        history.push(PlotPoint(0.05, 0.01 * (i + 1), 0.01 * (i + 1) * 1.5, 0.01 * (i + 1)))
    assert len(history) == 4
    assert np.allclose(history.series("measured"), [0.03, 0.04, 0.05, 0.06])
    assert history.relative_error("predicted") == pytest.approx(0.5)
    assert history.relative_error("corrected") == pytest.approx(0.0)
    assert graph_scale(history) == pytest.approx(0.1)  # 1-2-5 step above 1.1 x 0.09 s


def test_graph_geometry_stays_inside_its_panel() -> None:
    history = FrameHistory(length=10)
    for i in range(10):
        history.push(PlotPoint(0.05, 0.02 + 0.01 * i, 0.04, float("nan") if i == 3 else 0.05))
    rect = (10.0, 100.0, 200.0, 50.0)
    v = graph_vertices(history, rect, graph_scale(history), 2.0)
    assert v.shape[1] == 6 and np.isfinite(v).all()
    assert v[:, 0].min() >= 10 - 1 and v[:, 0].max() <= 210 + 1
    assert v[:, 1].min() >= 100 - 1 and v[:, 1].max() <= 150 + 1
    assert len(polyline_vertices(np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 0.0]]), 2, WHITE)) == 12


def test_font_atlas_lays_out_text_left_to_right() -> None:
    font = FontAtlas(font_size_for(720))
    assert font.size == 15 and font.image.max() == 255  # glyphs were rasterised
    quads = font.text_vertices([("AB C", 10.4, 20.0, WHITE), ("x", 0, 40, GREY)])
    assert quads.shape == (4 * 6, 8)  # the space draws nothing
    lefts = quads[::6, 0]
    assert lefts[0] == 10 and lefts[0] < lefts[1] < lefts[2]
    assert lefts[2] - lefts[0] == pytest.approx(font.text_width("AB "))
    assert lefts[3] == 0 and (quads[18:, 1] >= 40).all()
    assert font.text_vertices([]).shape == (0, 8)
    assert font.text_vertices([("\u00e9", 0, 0, WHITE)]).shape == (6, 8)  # unknown -> '?'


# ---- headless (no display needed) -------------------------------------------------------------


def test_headless_records_frames_and_display_cost(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    record = tmp_path / "rec"
    assert run_view(_args("--headless", "--frames", "3", "--record", str(record))) == 0
    rows = _rows(record)
    assert [int(r["frame"]) for r in rows] == [0, 1, 2]
    assert all((int(r["width"]), int(r["height"])) == SIZE for r in rows)
    frames = sorted((record / "frames").glob("*.png"))
    assert len(frames) == 3
    image = _image(frames[-1])
    assert image.shape == (SIZE[1], SIZE[0], 3) and _shows_scene(image)
    summary = json.loads((record / "run.json").read_text())
    assert summary["frames"] == 3 and summary["headless"] is True
    assert summary["display_ms"]["median"] > 0
    assert 0 < summary["display_fraction_of_frame"]["median"] < 10
    assert (record / "camera_path.json").exists()


def test_headless_replay_repeats_the_camera_path(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    path = _path_file(tmp_path, 3)
    first, second = tmp_path / "a", tmp_path / "b"
    assert run_view(_args("--headless", "--path", str(path), "--record", str(first))) == 0
    replay = first / "camera_path.json"
    assert run_view(_args("--headless", "--path", str(replay), "--record", str(second))) == 0
    cam_cols = [f"{p}_{a}" for p in ("eye", "target") for a in "xyz"]
    a, b = _rows(first), _rows(second)
    assert len(a) == len(b) == 3  # the path's length ends the run
    assert [[r[c] for c in cam_cols] for r in a] == [[r[c] for c in cam_cols] for r in b]


def test_headless_input_moves_camera_and_changes_knobs(tmp_path: Path, monkeypatch) -> None:
    import glfw

    from autotune_app.viewer import main_loop

    monkeypatch.delenv("DISPLAY", raising=False)
    step = main_loop.Viewer.step
    events = {
        1: [("scroll", 3.0)],
        2: [(glfw.KEY_W, glfw.PRESS)],
        3: [(glfw.KEY_W, glfw.RELEASE), (glfw.KEY_R, glfw.PRESS)],
        4: [(glfw.KEY_MINUS, glfw.PRESS), (glfw.KEY_T, glfw.PRESS), (glfw.KEY_3, glfw.PRESS)],
        5: [("cursor", (100, 80)), ("button", glfw.PRESS), ("cursor", (160, 60))],
        6: [("button", glfw.RELEASE), ("cursor", (300, 10))],
    }

    def scripted_step(viewer: main_loop.Viewer) -> bool:
        for key, value in events.get(viewer.frame_index, []):
            if key == "scroll":
                viewer.scroll_callback(None, 0.0, value)
            elif key == "cursor":
                viewer.cursor_callback(None, *value)
            elif key == "button":
                viewer.mouse_button_callback(None, glfw.MOUSE_BUTTON_LEFT, value, 0)
            else:
                viewer.key_callback(None, key, 0, value, 0)
        return step(viewer)

    monkeypatch.setattr(main_loop.Viewer, "step", scripted_step)
    record = tmp_path / "rec"
    assert run_view(_args("--headless", "--frames", "7", "--record", str(record))) == 0
    rows = _rows(record)
    eye = [np.array([float(r[f"eye_{a}"]) for a in "xyz"]) for r in rows]
    target = [np.array([float(r[f"target_{a}"]) for a in "xyz"]) for r in rows]
    dist = [np.linalg.norm(e - t) for e, t in zip(eye, target, strict=True)]
    assert dist[1] == pytest.approx(dist[0] * 0.9**3)  # scrolled in
    assert not np.allclose(target[2], target[1])  # W flew forward, eye and target together
    assert np.allclose(eye[2] - eye[1], target[2] - target[1])
    assert np.allclose(eye[3], eye[0]) and np.allclose(target[3], target[0])  # R reset
    assert float(rows[4]["target_ms"]) == pytest.approx(float(TARGET_MS) / 1.25)
    assert rows[4]["tuning"] == "0" and rows[4]["controller"] == "pi"
    assert not np.allclose(eye[5], eye[4]) and np.allclose(target[5], target[4])  # dragged
    assert dist[5] == pytest.approx(dist[4])  # orbiting keeps the distance
    assert np.allclose(eye[6], eye[5])  # moving with the button up does not orbit


def test_headless_prints_a_summary_and_records_the_error(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.delenv("DISPLAY", raising=False)
    record = tmp_path / "rec"
    assert run_view(_args("--headless", "--frames", "3", "--record", str(record))) == 0
    out = capsys.readouterr().out
    assert "mean |frame - target| / target" in out and "p95" in out
    assert "frames over budget (>5%)       : " in out and "mean AO rays chosen" in out
    assert f"recorded to {record}/" in out
    summary = json.loads((record / "run.json").read_text())
    with open(record / "frames.csv") as f:  # the error is the recorded frames' error
        rows = list(csv.DictReader(f))
    measured = np.array([float(r["measured_ms"]) for r in rows])
    target = np.array([float(r["render_target_ms"]) for r in rows])  # what the renderer held
    assert len(rows) == 3
    assert summary["mean_abs_error_vs_target"] == pytest.approx(
        np.mean(np.abs(measured - target) / target), rel=1e-6)
    assert summary["frames_over_budget"] == int(np.sum(measured > 1.05 * target))


def test_the_interval_between_shown_frames_is_accounted_and_held(tmp_path: Path, monkeypatch):
    """Each interval is its timed parts plus a non-negative rest; the renderer's target is the
    interval's target less the median rest of the frames before (the first one excluded)."""
    from autotune_app.viewer import interval

    monkeypatch.delenv("DISPLAY", raising=False)
    record = tmp_path / "rec"
    assert run_view(_args("--headless", "--frames", "5", "--record", str(record))) == 0
    rows = _rows(record)
    parts = ["poll_ms", "renderer_ms", "display_ms", "record_ms", "present_ms", "other_ms"]
    for r in rows:
        assert float(r["other_ms"]) >= -1e-6
        assert sum(float(r[p]) for p in parts) == pytest.approx(float(r["interval_ms"]))
        assert float(r["renderer_ms"]) >= float(r["measured_ms"]) - 1e-6
    target = float(TARGET_MS)
    rest = [float(r["interval_ms"]) - float(r["measured_ms"]) for r in rows]
    assert float(rows[0]["render_target_ms"]) == float(rows[1]["render_target_ms"]) == target
    for i in range(2, len(rows)):
        expected = max(interval.MIN_RENDER_SHARE * target, target - np.median(rest[1:i]))
        assert float(rows[i]["render_target_ms"]) == pytest.approx(expected, rel=1e-6)
    summary = json.loads((record / "run.json").read_text())
    assert set(summary["interval_parts_median_ms"]) == set(parts)
    assert summary["interval_ms"]["median"] > 0
    assert len(sorted((record / "frames").glob("*.png"))) == 5  # every writer-thread PNG


def test_record_refuses_an_earlier_recording_and_force_adds_a_run(tmp_path: Path, monkeypatch,
                                                                  capsys) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    record = tmp_path / "rec"
    assert run_view(_args("--headless", "--frames", "3", "--record", str(record))) == 0
    before = {p: p.read_bytes() for p in record.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert run_view(_args("--headless", "--frames", "2", "--record", str(record))) == 2
    err = capsys.readouterr().err
    assert str(record) in err and "--force" in err and err.count("\n") == 1
    assert run_view(_args("--headless", "--frames", "2", "--record", str(record), "--force")) == 0
    after = {p: p.read_bytes() for p in record.rglob("*") if p.is_file() and p in before}
    assert after == before  # the earlier recording is untouched
    run = record / "run-1"
    assert len(list((run / "frames").glob("*.png"))) == len(_rows(run)) == 2
    assert json.loads((run / "run.json").read_text())["frames"] == 2


def test_size_is_a_deprecated_alias_of_width_and_height() -> None:
    parser = argparse.ArgumentParser()
    add_view_parser(parser.add_subparsers())
    args = parser.parse_args(["view", "--size", "200x100"])
    assert (args.width, args.height) == (200, 100)
    args = parser.parse_args(["view", "--width", "64", "--height", "48", "--fps", "20"])
    assert (args.width, args.height, args.fps) == (64, 48, 20)


def test_headless_needs_an_end(capsys) -> None:
    assert run_view(_args("--headless")) == 2
    assert "--frames" in capsys.readouterr().err


# ---- bad input ------------------------------------------------------------------------------


def test_no_display_says_so(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert run_view(_args("--frames", "1")) == 2
    err = capsys.readouterr().err
    assert "display" in err and "--headless" in err and "Xvfb" in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_unreachable_display_says_so(monkeypatch, capsys) -> None:
    monkeypatch.setenv("DISPLAY", ":4242")  # nothing listens there
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert run_view(_args("--frames", "1")) == 2
    err = capsys.readouterr().err
    assert "display" in err and "--headless" in err and "Traceback" not in err


@pytest.mark.parametrize("content", [None, "{not json", '{"cameras": []}'])
def test_unreadable_camera_path_names_the_file(tmp_path: Path, capsys, content) -> None:
    path = tmp_path / "broken_path.json"
    if content is not None:
        path.write_text(content)
    assert run_view(_args("--headless", "--path", str(path))) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err and err.count("\n") == 1


def test_unknown_scene_is_one_line(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    args = _args("--headless", "--frames", "1")
    args.scene = "no-such-scene"
    assert run_view(args) == 2
    err = capsys.readouterr().err
    assert "no-such-scene" in err and "Traceback" not in err and err.count("\n") == 1


def test_unwritable_record_directory_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert run_view(_args("--headless", "--frames", "1", "--record", str(blocker / "rec"))) == 2
    err = capsys.readouterr().err
    assert str(blocker / "rec") in err and "Traceback" not in err and err.count("\n") == 1


# ---- window under Xvfb ------------------------------------------------------------------------


def _start_xvfb(*extra: str):
    """A private Xvfb on a display number it picks itself (``-displayfd``: no race with
    another test process starting one at the same time); skips the test when Xvfb is not
    installed."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (apt-get install xvfb)")
    read, write = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x720x24", "-nolisten", "tcp",
         *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write,),
    )
    os.close(write)
    with os.fdopen(read) as numbers:
        ready, _, _ = select.select([numbers], [], [], 10)
        number = numbers.readline().strip() if ready else ""
    if not number.isdigit():
        proc.kill()
        pytest.skip("Xvfb did not start")
    return proc, f":{number}"


@pytest.fixture(scope="module")
def xvfb():
    proc, display = _start_xvfb()
    yield display
    proc.terminate()
    proc.wait()


def _run_in_window(display: str, script: str, timeout: float = 120) -> subprocess.CompletedProcess:
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "DISPLAY": display, "PYTHONPATH": pythonpath}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# The viewer's own run(), with key presses injected through its glfw key callback at set frames.
WINDOW_SCRIPT = """
import sys, glfw
from autotune_app.viewer import app, main_loop
from tests.test_viewer import _args

presses = {{2: [(glfw.KEY_EQUAL, glfw.MOD_SHIFT), (glfw.KEY_P, 0)], 3: [(glfw.KEY_O, 0)],
            4: [(glfw.KEY_O, 0), (glfw.KEY_2, 0), (glfw.KEY_S, glfw.MOD_SHIFT)]}}
step = main_loop.Viewer.step

def scripted_step(self):
    for key, mods in presses.get(self.frame_index, []):
        self.key_callback(self.surface.window, key, 0, glfw.PRESS, mods)
        self.key_callback(self.surface.window, key, 0, glfw.RELEASE, mods)
    if self.frame_index == 5:
        glfw.set_window_size(self.surface.window, 256, 144)
    return step(self)

main_loop.Viewer.step = scripted_step
app.run(_args("--path", {path!r}, "--frames", "8", "--record", {record!r}))
"""


def test_window_replays_path_keys_screenshot_overlay_resize(xvfb, tmp_path: Path) -> None:
    record = tmp_path / "rec"
    path = _path_file(tmp_path, 8, still=True)
    result = _run_in_window(xvfb, WINDOW_SCRIPT.format(path=str(path), record=str(record)))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = _rows(record)
    assert len(rows) == 8
    # '+' at frame 2 raised the target; '2' at frame 4 switched to the fixed controller.
    assert float(rows[2]["target_ms"]) > float(rows[1]["target_ms"]) == float(TARGET_MS)
    assert rows[3]["controller"] == "feedforward" and rows[4]["controller"] == "fixed"
    # Shift+S forced shadows on.
    assert all(r["shadows"] == "1" for r in rows[4:])
    # P saved a screenshot of the window with the overlay; it shows the scene.
    shots = list(record.glob("screenshot_*.png"))
    assert [s.name for s in shots] == ["screenshot_00002.png"]
    shot = _image(shots[0])
    assert shot.shape == (SIZE[1], SIZE[0], 3) and _shows_scene(shot)
    # Frame 3 was drawn with the overlay off (O): the graph area differs from the screenshot.
    scene_only = _image(record / "frames" / "00003.png")
    assert _shows_scene(scene_only)
    assert np.abs(_graph_area(shot) - _graph_area(scene_only)).mean() > 15
    assert np.array_equal(_image(record / "frames" / "00002.png"), shot)
    # Resizing the window re-allocated the render target.
    assert (int(rows[-1]["width"]), int(rows[-1]["height"])) == (256, 144)
    assert _image(record / "frames" / "00007.png").shape == (144, 256, 3)


def recording(record: Path, name: str) -> bool:
    """Whether ``name`` (a glob) exists in ``record``, or in the hidden folder that becomes
    ``record`` when the run ends (``atomic_files.output_dir``)."""
    folders = [record, *record.parent.glob(f".{record.name}.*.tmp")]
    return any(any(folder.glob(name)) for folder in folders)


def _wait_for(check, seconds: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"viewer exited or stalled: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)


def test_real_x_key_events_through_the_cli(xvfb, tmp_path: Path) -> None:
    if shutil.which("xdotool") is None:
        pytest.skip("xdotool is not installed (apt-get install xdotool)")
    record = tmp_path / "rec"
    path = _path_file(tmp_path, 200, still=True)
    argv = ["view", "--scene", SCENE, "--size", "320x180", "--target-ms", TARGET_MS]
    argv += ["--path", str(path), "--record", str(record)]
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "DISPLAY": xvfb, "PYTHONPATH": pythonpath}
    code = f"import sys\nfrom autotune_app.cli import main\nsys.exit(main({argv!r}))"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True
    )

    def key(name: str) -> None:
        subprocess.run(["xdotool", "key", name], env=env, check=True)

    try:
        _wait_for(lambda: recording(record, "frames/00000.png"), 90, proc)
        subprocess.run(["xdotool", "mousemove", "40", "40"], env=env, check=True)  # focus
        key("equal")
        key("p")
        _wait_for(lambda: recording(record, "screenshot_*.png"), 30, proc)
        key("Escape")
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    rows = _rows(record)
    assert len(rows) < 200  # Esc ended the run before the path did
    assert float(rows[-1]["target_ms"]) == pytest.approx(float(TARGET_MS) * 1.25)


def test_no_opengl_33_context_says_so(tmp_path: Path) -> None:
    proc, display = _start_xvfb("-extension", "GLX")
    try:
        result = _run_in_window(
            display,
            "import sys\nfrom autotune_app.viewer import run_view\n"
            "from tests.test_viewer import _args\n"
            "sys.exit(run_view(_args('--frames', '1')))",
        )
    finally:
        proc.terminate()
        proc.wait()
    assert result.returncode == 2, result.stderr[-2000:]
    assert "OpenGL 3.3" in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
