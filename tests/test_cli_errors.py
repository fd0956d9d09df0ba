"""Issue 10 as a new user meets it: nothing of theirs is lost, no traceback for a value the
command accepted, messages that name their path and the real problem, one consistent CLI."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from autotune_app import cli
from autotune_app.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ["demo", "--volume-ranks", "0"]  # the ray-tracer half only: no MPI job per test
SMALL = ["--width", "32", "--height", "18"]
pytestmark = pytest.mark.filterwarnings("ignore::autotune.AutotuneWarning")


def _parser_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def _one_line_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def _user_folder(path: Path) -> Path:
    path.mkdir()
    (path / "thesis.tex").write_text("years of work")
    return path


def _untouched(path: Path) -> bool:
    return [p.name for p in path.iterdir()] == ["thesis.tex"] and \
        (path / "thesis.tex").read_text() == "years of work"


# ---- data loss ------------------------------------------------------------------------------


def test_demo_refuses_a_non_empty_out_folder(tmp_path, capsys):
    out = _user_folder(tmp_path / "mine")
    err = _one_line_error([*DEMO, "--scene", "dragon-small", "--frames", "2", *SMALL,
                           "--out", str(out)], capsys)
    assert str(out) in err and "--force" in err
    assert _untouched(out)


def test_demo_refuses_the_working_folder(tmp_path, capsys, monkeypatch):
    _user_folder(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    _one_line_error([*DEMO, "--scene", "dragon-small", "--frames", "2", *SMALL, "--out", "."],
                    capsys)
    assert _untouched(Path("."))


def test_demo_force_writes_into_the_folder_and_deletes_nothing(tmp_path, capsys):
    out = _user_folder(tmp_path / "mine")
    assert main([*DEMO, "--scene", "dragon-small", "--frames", "2", *SMALL, "--fps", "25",
                 "--controller", "fixed", "--eye", "0.3,0.2,0.3", "--look-at", "0,0.1,0",
                 "--out", str(out), "--force"]) == 0
    assert (out / "thesis.tex").read_text() == "years of work"
    figures = json.loads((out / "figures.json").read_text())
    assert figures["target_ms"] == pytest.approx(40.0) and figures["controller"] == "fixed"
    assert len(list((out / "frames").glob("*.png"))) == 2
    assert "controller fixed" in capsys.readouterr().out


def test_demo_into_an_empty_working_folder(tmp_path, capsys, monkeypatch):
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    assert main([*DEMO, "--scene", "dragon-small", "--frames", "1", *SMALL, "--target-ms", "20",
                 "--out", "."]) == 0
    assert Path("report.txt").exists() and Path.cwd() == (tmp_path / "empty").resolve()


@pytest.mark.parametrize("bench, measures", [
    ("paper", "benchmarks.governed.tracer_tuned.command.run_scene"),
    ("model", "benchmarks.governed.tracer_model.measure"),
])
def test_bench_plots_refuses_a_non_empty_folder_before_running(bench, measures, tmp_path,
                                                               capsys, monkeypatch):
    out = _user_folder(tmp_path / "plots")

    def measured(*args, **kwargs):
        raise AssertionError("measured before refusing the folder")

    monkeypatch.setattr(measures, measured)
    err = _one_line_error(["bench", bench, "--scene", "dragon-small", "--plots", str(out)],
                          capsys)
    assert str(out) in err and "--force" in err and _untouched(out)


# ---- tracebacks for values the CLI accepted -----------------------------------------------------


def test_seed_out_of_range(capsys):
    err = _parser_error(["render", "--seed", "-1"], capsys)
    assert "--seed" in err and "0..4294967295" in err and "Traceback" not in err


def test_huge_image_is_checked_against_the_device(capsys):
    import pyopencl as cl

    from raytracer.device.choice import choose_device

    device = choose_device()[1]
    if device.max_mem_alloc_size >= 16 * 16384 * 16384 and \
            device.global_mem_size >= 28 * 16384 * 16384:
        pytest.skip("this device could render 16384x16384")
    assert isinstance(device, cl.Device)
    err = _one_line_error(["render", "--scene", "dragon-small", "--width", "16384",
                           "--height", "16384"], capsys)
    assert "16384x16384" in err and "MiB" in err and "smaller" in err


def test_device_memory_check_names_the_limit():
    from types import SimpleNamespace

    from autotune_app.limits import LimitError, check_device_memory

    dev = SimpleNamespace(max_mem_alloc_size=1 << 30, global_mem_size=8 << 30)
    tracer = SimpleNamespace(context=SimpleNamespace(devices=[dev]), counters=False,
                             device_info=SimpleNamespace(name="toy"))
    check_device_memory(tracer, 4096, 4096)  # 256 MiB of hits: fine
    with pytest.raises(LimitError, match="CL_DEVICE_MAX_MEM_ALLOC_SIZE"):
        check_device_memory(tracer, 16384, 16384)


def test_gl_size_check_names_the_limit():
    from types import SimpleNamespace

    from autotune_app.limits import LimitError, check_gl_size

    ctx = SimpleNamespace(info={"GL_MAX_RENDERBUFFER_SIZE": 8192, "GL_MAX_TEXTURE_SIZE": 16384,
                                "GL_MAX_VIEWPORT_DIMS": (16384, 16384)})
    check_gl_size(ctx, 8192, 100)
    with pytest.raises(LimitError, match="8192x8192"):
        check_gl_size(ctx, 9000, 100)


def test_view_huge_size_is_one_line(capsys):
    err = _parser_error(["view", "--headless", "--frames", "1", "--size", "100000x100000"],
                        capsys)
    assert "100000x100000" in err and "Traceback" not in err


def test_view_headless_beyond_the_gl_limit_is_one_line(capsys, monkeypatch):
    from autotune_app import limits

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(limits, "check_gl_size", lambda ctx, w, h: (_ for _ in ()).throw(
        limits.LimitError(f"size {w}x{h} is larger than this OpenGL driver allows")))
    err = _one_line_error(["view", "--headless", "--frames", "1", "--scene", "spheres",
                           "--width", "4000", "--height", "4000"], capsys)
    assert "4000x4000" in err


def test_numba_wrapped_ctrl_c_is_an_interruption(capsys, monkeypatch):
    def interrupted_in_parallel_region(args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("<function> returned a result with an exception set") from exc

    monkeypatch.setattr(cli, "_cmd_demo", interrupted_in_parallel_region)
    assert main(["demo"]) == 130
    err = capsys.readouterr().err
    assert err == "autotune demo: interrupted\n"


def test_ctrl_c_during_demo_prints_interrupted_and_exits_130(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune_app.cli", *DEMO, "--scene", "dragon-small",
         "--frames", "400", "--width", "160", "--height", "90", "--target-ms", "30",
         "--out", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not any(p.name.startswith(".demo") for p in tmp_path.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.1)
        time.sleep(1.0)  # rendering frames now (probe in numba, kernels in OpenCL)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "autotune demo: interrupted" in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no half-written demo, no work folder


# ---- messages -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x.jpg", "x"])
def test_output_must_be_png(name, tmp_path, capsys):
    out = tmp_path / name
    err = _one_line_error(["render", "--scene", "dragon-small", *SMALL, "-o", str(out)], capsys)
    assert str(out) in err and ".png" in err and not out.exists()


def test_output_into_an_existing_folder_names_it(tmp_path, capsys):
    folder = tmp_path / "shots.png"
    folder.mkdir()
    err = _one_line_error(["render", "--scene", "dragon-small", *SMALL, "-o", str(folder)],
                          capsys)
    assert str(folder) in err and ".tmp" not in err and "folder" in err


def test_written_files_follow_the_umask(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        out = tmp_path / "img.png"
        assert main(["render", "--scene", "dragon-small", *SMALL, "-o", str(out)]) == 0
        demo = tmp_path / "demo"
        assert main([*DEMO, "--scene", "dragon-small", "--frames", "1", *SMALL,
                     "--target-ms", "20", "--out", str(demo)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    assert stat.S_IMODE(demo.stat().st_mode) == 0o755
    assert stat.S_IMODE((demo / "report.txt").stat().st_mode) == 0o644


@pytest.mark.parametrize("command", [["demo"], ["view", "--headless", "--frames", "1"]])
def test_target_inf_names_the_option(command, capsys):
    err = _parser_error([*command, "--target-ms", "inf"], capsys)
    assert "--target-ms" in err and "must be a finite positive number" in err
    assert "target_seconds" not in err


@pytest.mark.parametrize("command", [["demo"], ["view", "--headless", "--frames", "1"]])
def test_target_not_a_number(command, capsys):
    err = _parser_error([*command, "--target-ms", "abc"], capsys)
    assert "--target-ms" in err and "invalid value 'abc'" in err and "_positive" not in err


def test_ao_radius_has_a_range(capsys):
    err = _parser_error(["render", "--ao-radius", "1e30"], capsys)
    assert "--ao-radius" in err and "(0, 1]" in err


def test_degenerate_triangle_warning_is_one_line(tmp_path, capsys):
    mesh = tmp_path / "deg.obj"
    mesh.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 2 0 0\nf 1 2 3\nf 1 2 4\n")
    assert main(["render", "--scene", str(mesh), *SMALL]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "degenerate" in line]
    assert lines == [f"autotune: warning: {mesh}: dropped 1 degenerate triangles of 2 "
                     f"(zero area)"]
    assert "warn(" not in err and "scene.py" not in err


# ---- one CLI --------------------------------------------------------------------------------


def _all_parsers():
    parser = build_parser()
    yield "autotune", parser
    for action in parser._subparsers._group_actions:
        yield from action.choices.items()


def test_every_option_has_help_and_no_rst_markup():
    for name, parser in _all_parsers():
        assert "``" not in (parser.description or ""), name
        for action in parser._actions:
            if action.dest == "help":
                continue
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
            assert "``" not in action.help and ":func:" not in action.help


def test_help_shows_defaults_and_one_size_form(capsys):
    for command, needles in [("render", ["(default: 1280)", "(default: dragon)", "--up"]),
                             ("demo", ["(default: 640)", "(default: dragon)", "--fps",
                                       "--controller", "--force", "--eye", "--look-at"]),
                             ("view", ["(default: 1280)", "(default: dragon)", "--fps",
                                       "(default: 50.0)", "--width", "--force"])]:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        out = capsys.readouterr().out
        for needle in needles:
            assert needle in out, (command, needle)


def test_scenes_lists_shipped_scenes_with_triangles(capsys):
    assert main(["scenes"]) == 0
    out = capsys.readouterr().out
    assert "dragon" in out and "202,520" in out and "sibenik" in out
    assert main(["scenes", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows if r["default"]] == ["dragon"]


def test_bench_paper_prints_a_table(capsys):
    assert main(["bench", "paper", "--scene", "dragon-small", "--frames", "4", *SMALL,
                 "--controller", "feedforward", "--target-ms", "20", "--no-load"]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "[1] dragon-small" in out and "mean_abs_error_vs_target" in out


def test_eye_and_look_at_move_the_camera(tmp_path, capsys):
    default, moved = tmp_path / "a.png", tmp_path / "b.png"
    assert main(["render", "--scene", "spheres", *SMALL, "-o", str(default)]) == 0
    assert main(["render", "--scene", "spheres", *SMALL, "-o", str(moved),
                 "--eye", "0,12,0.5", "--look-at", "0,0,0"]) == 0
    a, b = (np.asarray(Image.open(p), np.float64) for p in (default, moved))
    assert np.abs(a - b).mean() > 5
    assert main(["render", "--scene", "spheres", "--eye", "1,1,1", "--look-at", "1,1,1"]) == 2
    assert "must differ" in capsys.readouterr().err


def test_render_reports_load_and_bvh_times_and_caches_big_meshes(tmp_path, capsys, monkeypatch):
    import trimesh

    from autotune_app import scenes

    monkeypatch.setenv("AUTOTUNE_MESH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(scenes, "CACHE_MIN_BYTES", 0)
    mesh = tmp_path / "ball.ply"
    mesh.write_bytes(trimesh.creation.icosphere(3).export(file_type="ply", encoding="ascii"))
    argv = ["render", "--scene", str(mesh), *SMALL, "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["mesh_cache"] == "written" and first["load_ms"] > 0
    assert first["bvh"]["build_ms"] > 0
    assert len(list((tmp_path / "cache").glob("*.npz"))) == 1

    def no_parsing(path):
        raise AssertionError("parsed again despite the cache")

    monkeypatch.setattr(scenes, "read_mesh", no_parsing)
    assert main(argv) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["mesh_cache"] == "hit" and second["triangles"] == first["triangles"]
    monkeypatch.undo()
    monkeypatch.setenv("AUTOTUNE_MESH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(scenes, "CACHE_MIN_BYTES", 0)
    os.utime(mesh, ns=(time.time_ns(), time.time_ns() + 10**9))  # edited: parse again
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["mesh_cache"] == "written"
    assert not list((tmp_path / "cache").glob(".*tmp"))


def test_mesh_cache_dir_follows_xdg(monkeypatch, tmp_path):
    from autotune_app.scenes import mesh_cache_dir

    monkeypatch.delenv("AUTOTUNE_MESH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert mesh_cache_dir() == tmp_path / "autotune" / "meshes"
