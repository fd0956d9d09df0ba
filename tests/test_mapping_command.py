"""``autotune mapping FILE.toml`` (issue 22): the shipped examples, --search, --json, and one
clear error naming the entry for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune_app.cli import main
from studies.pipeline_mapping.mapping_file import load_mapping

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "assets" / "mappings").glob("*.toml"))

PIPELINE = """
frame = "viewer"

[[network]]
name = "gige"
bandwidth_MBps = 100

[[node]]
name = "a"
cpus = 4
networks = ["gige"]

[[node]]
name = "b"
cpus = 2
networks = ["gige"]

[[module]]
name = "rank"
time_ms = 40
load = 1.0
nodes = ["a", "b"]

[[module]]
name = "compositor"
time_ms = 10
load = 0.5
node = "a"

[[module]]
name = "viewer"
time_ms = 5
load = 0.5
node = "a"
fixed = true

[[connection]]
from = "rank"
to = "compositor"
volume_MB = 1.0

[[connection]]
from = "compositor"
to = "viewer"
kind = "greedy"
volume_MB = 2.0

[[latency]]
path = ["rank", "compositor", "viewer"]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(text)
    return path


def one_line_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_the_shipped_examples_predict(path, capsys):
    assert main(["mapping", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["frame"]["fps"] > 0 and out["latency"] and not out["overflows"]
    assert not any(n["send_overflow"] or n["receive_contention"] for n in out["network"])


def test_prediction_as_text(tmp_path, capsys):
    assert main(["mapping", str(write(tmp_path, PIPELINE))]) == 0
    out = capsys.readouterr().out
    # rank[1] on b: 40 ms; the compositor waits for both ranks; the frame is the ranks'
    assert "frame (viewer): 40.0 ms, 25.0 fps; bottleneck: rank[0]" in out
    # T_it 40 + 40 + 5, and rank[1] on b sends 1 MB at 100 MB/s: 10 ms
    assert "latency rank -> compositor -> viewer: 95.0 ms" in out


def test_an_overflow_is_reported(tmp_path, capsys):
    text = PIPELINE.replace('time_ms = 10\nload = 0.5\nnode = "a"',
                            'time_ms = 60\nload = 0.5\nnode = "a"')
    assert main(["mapping", str(write(tmp_path, text)), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(o["consumer"], o["producer"]) for o in out["overflows"]} == {
        ("compositor", "rank[0]"), ("compositor", "rank[1]")}


def test_search_keeps_everything_on_the_four_cpu_node(tmp_path, capsys):
    assert main(["mapping", str(write(tmp_path, PIPELINE)), "--search", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    best, second = out["best"][:2]
    # a has a CPU for each: 25 fps like the given mapping, but no 10 ms hop and no traffic
    assert best["placement"] == {"rank": ["a", "a"], "compositor": ["a"], "viewer": ["a"]}
    assert best["fps"] == pytest.approx(25) and best["latency_ms"] == pytest.approx(85)
    assert second["fps"] == pytest.approx(25) and second["latency_ms"] == pytest.approx(95)
    # ranks: {a,a} {a,b} {b,b}; compositor a or b; nodes a and b are not interchangeable
    # because the viewer is fixed on a: 3 x 2 = 6 mappings
    assert out["candidates"] == 6


def test_search_with_pins_deduplicates_cpus(tmp_path, capsys):
    text = PIPELINE.replace('nodes = ["a", "b"]', 'nodes = ["a"]')
    assert main(["mapping", str(write(tmp_path, text)), "--search", "--pin", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # rank, compositor movable; (a,a): 2 pinnings; (a,b), (b,a): 1 each; (b,b): 2 -> 6
    assert out["candidates"] == 6
    assert all(":" in p for p in out["best"][0]["placement"]["rank"])


def test_the_loader_keeps_fixed_and_frame(tmp_path):
    loaded = load_mapping(write(tmp_path, PIPELINE))
    assert loaded.frame == ("viewer",) and loaded.fixed == {"viewer"}
    no_frame = load_mapping(write(tmp_path, PIPELINE.replace('frame = "viewer"', "")))
    assert no_frame.frame == ("viewer",)  # the sinks


BAD = [
    ('to = "compositor"', 'to = "nowhere"', "connection 1 (rank -> nowhere): unknown module "
                                            "'nowhere'"),
    ('nodes = ["a", "b"]', 'nodes = ["a", "z"]', "module 'rank': unknown node 'z'"),
    ("time_ms = 40", "time_ms = -40", "module 'rank': time_ms must be a finite number > 0"),
    ("time_ms = 40\nload = 1.0", "time_ms = 40\nload = 0", "module 'rank': load must be a "
                                                          "finite number > 0, got 0"),
    ('nodes = ["a", "b"]', 'nodes = ["a", "b"]\ncpus = [0, 2]',
     "module 'rank': pinned to CPU 2 but node 'b' has 2 CPU(s)"),
    ('kind = "greedy"', 'kind = "lossy"', "connection 2 (compositor -> viewer): kind must be "
                                          "one of fifo, greedy"),
    ("volume_MB = 1.0", "volume_MB = 1.0\nvolme = 3", "connection 1: unknown key 'volme'"),
    ('frame = "viewer"', 'frame = "display"', "frame: unknown module 'display'"),
    ("bandwidth_MBps = 100", "bandwidth_MBps = 0", "network 'gige': bandwidth must be a "
                                                   "finite number > 0"),
    ('name = "b"\ncpus = 2', 'name = "b"\ncpus = 0', "node 'b': cpus must be a whole number"),
    ('path = ["rank", "compositor", "viewer"]', 'path = ["viewer", "rank"]',
     "no connection from 'viewer' to 'rank'"),
    ("[[connection]]", "[[conection]]", "unknown key 'conection'"),
    ("load = 1.0", "load = 1.0\nload = 2", "not valid TOML"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD, ids=[b[2][:40] for b in BAD])
def test_bad_input_is_one_line_naming_the_entry(tmp_path, capsys, old, new, message):
    assert old in PIPELINE
    path = write(tmp_path, PIPELINE.replace(old, new, 1))
    err = one_line_error(["mapping", str(path)], capsys)
    assert message in err and str(path) in err, err


def test_a_cycle_that_cannot_be_ordered_names_its_modules(tmp_path, capsys):
    """Jubertie & Melin's first bad FluidParticle mapping: fluid, particles, renderer on one
    node."""
    text = """
[[network]]
name = "gige"
bandwidth_MBps = 100
[[node]]
name = "a"
cpus = 2
networks = ["gige"]
[[node]]
name = "b"
cpus = 2
networks = ["gige"]
[[module]]
name = "fluid"
time_ms = 70
load = 0.97
node = "a"
[[module]]
name = "particles"
time_ms = 20
load = 0.97
node = "a"
[[module]]
name = "viewer"
time_ms = 28
load = 0.97
node = "b"
[[module]]
name = "renderer"
time_ms = 57
load = 0.97
node = "a"
[[connection]]
from = "fluid"
to = "particles"
[[connection]]
from = "particles"
to = "viewer"
[[connection]]
from = "viewer"
to = "renderer"
kind = "greedy"
"""
    err = one_line_error(["mapping", str(write(tmp_path, text))], capsys)
    assert "'fluid' and 'renderer'" in err and "fluid / particles / renderer" in err


def test_pin_without_search_is_refused(tmp_path, capsys):
    err = one_line_error(["mapping", str(write(tmp_path, PIPELINE)), "--pin"], capsys)
    assert "--pin goes with --search" in err


def test_a_missing_file_is_one_line(tmp_path, capsys):
    err = one_line_error(["mapping", str(tmp_path / "none.toml")], capsys)
    assert "none.toml" in err


def test_the_shared_policy_is_a_choice(tmp_path, capsys):
    path = str(write(tmp_path, PIPELINE))
    assert main(["mapping", path, "--policy", "shared", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "shared" and out["frame"]["fps"] == pytest.approx(25)
    assert main(["mapping", path, "--policy", "shared"]) == 0
    assert "(CPU allocation: shared)" in capsys.readouterr().out
