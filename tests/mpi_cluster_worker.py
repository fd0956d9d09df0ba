"""Worker run under ``mpiexec -n 2 python -m mpi4py`` by tests/test_cluster_emulation.py.

``emulate DATA.json OUT``: (1) two emulated ranks composite real-sized random images: rank
0's final image equals the serial composite of both ranks' images in the view's visibility
order, and each rank's local render took the time it was given; over a slow link too. (2) a
plan of a 1-rank and a 2-rank configuration runs on sub-communicators and every row is written
to DATA.json as it finishes. (3) ``autotune volume --emulate`` sleeps the times drawn from a
histogram file on each rank. Rank 0 prints ``OK emulation``, ``OK plan rows=2``, ``OK volume``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from autotune_app.cli import main as cli
from raytracer.camera import Camera
from raytracer.mpi.faults import install_excepthook, world
from raytracer.volume.compositing import composite_serial
from raytracer.volume.distributed import DistributedRenderer, FrameSettings
from studies.cluster_prediction.emulation import EmulatedRenderer, random_premultiplied
from studies.cluster_prediction.files import (
    read_training_data,
    write_histogram,
    write_training_data,
)
from studies.cluster_prediction.perf_histogram import PathHistogram
from studies.cluster_prediction.training_data import (
    EmulationConfig,
    EmulationVolume,
    emulation_times,
    network,
    run_plan,
)


def emulation() -> None:
    comm = world()
    rank, size = comm.Get_rank(), comm.Get_size()
    w, h = 40, 24
    times = [0.02, 0.005, 0.03] if rank == 0 else [0.01, 0.025, 0.001]
    for net in ("shm", "slow"):
        local = EmulatedRenderer(times, seed=10 + rank)
        renderer = DistributedRenderer(EmulationVolume((64, 64, 64)), None, network(comm, net),
                                       "2-3-swap", local=local)
        images = [random_premultiplied(w, h, 10 + r) for r in range(size)]
        for i, eye in enumerate([(0.0, 0.0, 300.0), (300.0, 10.0, -5.0), (-3.0, -300.0, 1.0)]):
            cam = Camera(eye, (0.0, 0.0, 0.0))
            out = renderer.render_frame(cam, w, h, FrameSettings())
            if rank != 0:
                continue
            order = renderer.partition.visibility_order(cam.eye)
            want = composite_serial(images, order, "2-3-swap")
            assert out.image.shape == (h, w, 4)
            assert np.allclose(out.image, want.reshape(h, w, 4), atol=1e-6), "composite differs"
            rec = out.record
            for r, rt in enumerate(sorted(rec.ranks, key=lambda t: t.rank)):
                asked = [0.02, 0.005, 0.03][i] if r == 0 else [0.01, 0.025, 0.001][i]
                assert rt.render_seconds >= asked, (r, asked, rt.render_seconds)  # no upper
                # bound: a loaded machine wakes a sleeping rank late
            if net == "slow":  # 2 ms link: the swap and the gather pay it
                assert rec.ranks[0].composite_seconds > 0.002
    if rank == 0:
        print("OK emulation", flush=True)


def plan(data_path: str) -> None:
    comm = world()
    hist = PathHistogram.of(np.full((3, 2), 0.004) + np.arange(6).reshape(3, 2) * 1e-3)
    configs = [EmulationConfig("h", 16, 16, 2, "per-frame", 2),
               EmulationConfig("h", 16, 16, 1, "histogram", 2)]
    data = read_training_data(data_path, missing_ok=True) if comm.Get_rank() == 0 else None

    def sink(row: dict) -> None:
        data.add(row)
        write_training_data(data_path, data)

    rows = run_plan(comm, configs, {"h": (hist, "measured")}, sink if data is not None else None)
    if comm.Get_rank() == 0:
        assert [r["ranks"] for r in rows] == [1, 2]
        assert all(r["frame_seconds"] >= r["asked_max_seconds"] > 0 for r in rows)
        print(f"OK plan rows={len(read_training_data(data_path).rows)}", flush=True)


def volume_command(out: str) -> None:
    """``autotune volume --emulate H.json`` inside this job."""
    comm = world()
    hist = PathHistogram.of(np.array([[0.01, 0.03], [0.02, 0.015]]))
    path = Path(out + ".hist.json")
    if comm.Get_rank() == 0:
        write_histogram(path, hist)
    comm.Barrier()
    code = cli(["volume", "--volume", "marschner-lobb:16", "--emulate", str(path), "--frames", "3",
                "--width", "24", "--height", "16", "-o", out, "--json"])
    assert code == 0
    if comm.Get_rank() == 0:
        want = emulation_times(hist, 3, 2, "histogram", seed=0)
        got = json.loads((Path(out) / "timings.json").read_text())["frames"]
        for i, frame in enumerate(got):
            for r in frame["ranks"]:
                asked = want[i, r["rank"]]
                assert asked <= r["render_seconds"] < asked + 0.25, (i, r, asked)
        print("OK volume", flush=True)


def main(argv: list[str]) -> int:
    install_excepthook()
    if argv[0] == "emulate":
        emulation()
        plan(argv[1])
        volume_command(argv[2])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
