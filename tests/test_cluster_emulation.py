"""Emulated local rendering and the training-data generator (issue 14).

In-process: the emulated renderer sleeps the time it was given and returns real-sized
premultiplied images; the slow link delays messages as its model says; the generator writes
every row atomically as it finishes and a rerun does only what is missing. Under mpiexec
(2 ranks): emulated ranks composite real-sized images exactly like the serial composite, and a
plan runs on sub-communicators of its rank counts, and ``autotune volume --emulate H.json``
sleeps the histogram's times.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from raytracer.mpi.faults import world
from raytracer.mpi.launch import launch, mpiexec_path
from studies.cluster_prediction.emulation import EmulatedRenderer, SlowLinks, random_premultiplied
from studies.cluster_prediction.files import read_training_data, write_training_data
from studies.cluster_prediction.perf_histogram import PathHistogram
from studies.cluster_prediction.training_data import (
    EmulationConfig,
    TrainingData,
    emulation_times,
    run_plan,
)

WORKER = str(Path(__file__).with_name("mpi_cluster_worker.py"))
REPO = Path(__file__).resolve().parents[1]


def test_emulated_renderer_sleeps_and_returns_real_sized_images():
    r = EmulatedRenderer([0.03, 0.0], seed=3)
    t = time.perf_counter()
    img = r.render(None, 64, 48)
    took = time.perf_counter() - t
    assert took >= 0.03 and img.kernel_seconds == 0.03  # at least the time asked (no upper
    # bound: a shared machine may wake the sleeper late)
    assert img.rgba.shape == (48, 64, 4) and img.rgba.dtype == np.float32
    assert np.all(img.rgba[..., :3] <= img.rgba[..., 3:4] + 1e-7)  # premultiplied
    assert np.array_equal(img.rgba, random_premultiplied(64, 48, 3))
    r.render(None, 64, 48)
    assert r.render(None, 64, 48).kernel_seconds == 0.03  # the times cycle over the path
    img.rgba[:] = 0  # compositing overwrites its buffer: the next frame is fresh
    assert r.render(None, 64, 48).rgba.any()
    for bad in ([], [0.1, np.nan], [-1.0]):
        with pytest.raises(ValueError, match="render time"):
            EmulatedRenderer(bad)


class _Comm:
    def __init__(self) -> None:
        self.sent: list[int] = []

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 3

    def Isend(self, buf, dest, tag=0):  # noqa: N802
        self.sent.append(buf[0].nbytes)
        return "request"

    def Gatherv(self, sendbuf, recvbuf, root=0):  # noqa: N802
        pass


def test_slow_link_delays_each_message_by_its_model():
    comm = _Comm()
    slow = SlowLinks(comm, 0.01, 1e6)
    t = time.perf_counter()
    assert slow.Isend([np.zeros(5000, np.float32), None], 1) == "request"
    assert time.perf_counter() - t >= 0.03  # 10 ms + 20 kB / 1 MB/s, or more under load
    t = time.perf_counter()
    slow.Gatherv(None, [np.zeros(12, np.float32), [4, 4, 4], [0, 4, 8], None], root=0)
    assert time.perf_counter() - t >= 0.02  # two pieces of latency, 32 bytes
    assert slow.Get_size() == 3 and comm.sent == [20000]
    with pytest.raises(ValueError, match="bandwidth"):
        SlowLinks(comm, 0.0, 0.0)


def test_emulation_times_per_mode():
    t = np.array([[1.0, 2.0], [3.0, 4.0]]) * 1e-3
    h = PathHistogram.of(t, {"rank_means": [2e-3, 3e-3]})
    assert np.allclose(emulation_times(h, 3, 2, "vector", 0), [[2e-3, 3e-3]] * 3)
    per = emulation_times(h, 2, 5, "per-frame", 0)
    assert per[0].max() <= 2e-3 + 1e-12 and per[1].min() >= 3e-3 - 1e-12
    assert emulation_times(h, 4, 3, "histogram", 1).shape == (4, 3)
    with pytest.raises(ValueError, match="vector emulation needs 3"):
        emulation_times(h, 2, 3, "vector", 0)
    with pytest.raises(ValueError, match="unknown emulation mode"):
        emulation_times(h, 2, 2, "nope", 0)


def test_generator_appends_atomically_and_resumes(tmp_path):
    """A crash after the first row leaves a valid file with that row; a rerun does the rest."""
    hist = PathHistogram.of(np.full((2, 1), 0.002))
    configs = [EmulationConfig("h", 8, 8, 1, "histogram", 2),
               EmulationConfig("h", 16, 8, 1, "histogram", 2),
               EmulationConfig("h", 8, 16, 1, "per-frame", 2)]
    path = tmp_path / "data.json"
    data = TrainingData.empty({"about": "test"})

    def sink(row):
        if len(data.rows) == 1:
            raise KeyboardInterrupt  # the job dies while the second row is being written
        data.add(row)
        write_training_data(path, data)

    comm = world()
    with pytest.raises(KeyboardInterrupt):
        run_plan(comm, configs, {"h": (hist, "measured")}, sink)
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]  # no temporary files left
    again = read_training_data(path)
    assert len(again.rows) == 1 and json.loads(path.read_text())["version"] == 1
    todo = again.pending(configs)
    assert [c.key for c in todo] == [c.key for c in configs[1:]]

    def resume(row):
        again.add(row)
        write_training_data(path, again)

    rows = run_plan(comm, todo, {"h": (hist, "measured")}, resume)
    assert len(rows) == 2 and not read_training_data(path).pending(configs)
    assert all(r["frame_seconds"] >= 0.002 for r in read_training_data(path).rows)


@pytest.mark.skipif(mpiexec_path() is None, reason="mpiexec not installed")
def test_two_emulated_ranks_composite_real_images(tmp_path):
    """Also ``autotune volume --emulate`` in the same 2-rank job (one start-up)."""
    data = tmp_path / "rows.json"
    out = tmp_path / "volume_out"
    done = launch([WORKER, "emulate", str(data), str(out)], 2, timeout=120,
                  cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK emulation" in done.stdout and "OK volume" in done.stdout
    assert re.search(r"OK plan rows=2", done.stdout), done.stdout
    assert {r["ranks"] for r in read_training_data(data).rows} == {1, 2}
