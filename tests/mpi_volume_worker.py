"""Worker run under ``mpiexec -n K python -m mpi4py`` by tests/test_volume_distributed.py.

``equal VOLUME WIDTH HEIGHT``: the distributed image (every compositing algorithm,
axis-aligned and diagonal views, ERT off) must equal the single-process image of the whole
volume within 1e-5; one more frame at image scale 0.5 checks the upscale and the record.
Rank 0 prints ``OK ranks=K frames=N max=...``.

``equal-all VOLUME WIDTH HEIGHT 1,2,3``: the same on sub-communicators of those rank
counts in one job.

``bad NAME``: every rank must raise the same error for an unknown or broken volume, before
any rank builds a renderer; each prints ``rank R raised: <message>``.
"""

from __future__ import annotations

import sys

import numpy as np

from raytracer.camera import Camera
from raytracer.mpi.faults import AgreedError, install_excepthook, world
from raytracer.volume.compositing import ALGORITHMS
from raytracer.volume.distributed import DistributedRenderer, FrameSettings, load_everywhere


def views(radius: float) -> list[Camera]:
    d = 2.8 * radius
    diag = np.array([1.0, 0.7, 1.3]) / np.linalg.norm([1.0, 0.7, 1.3]) * d
    return [
        Camera((0.0, 0.0, d), (0.0, 0.0, 0.0)),
        Camera((-d, 0.0, 0.0), (0.0, 0.0, 0.0)),
        Camera((0.0, d, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0)),
        Camera(tuple(diag), (0.0, 0.0, 0.0)),
        Camera(tuple(-diag * [1, -1, 1]), (0.0, 0.0, 0.0)),
    ]


def equal_all(name: str, width: int, height: int, counts: list[int]) -> None:
    """:func:`equal` on sub-communicators of each rank count, in one job (one start-up)."""
    from mpi4py import MPI

    world_comm = world()
    volume, tf = load_everywhere(name, None, world_comm)
    reference = None
    if world_comm.Get_rank() == 0:
        from raytracer.volume.raycaster import Raycaster

        whole = Raycaster(volume, tf)
        reference = [whole.render(c, width, height, 1.0, 1.0).rgba for c in views(volume.radius)]
    for ranks in counts:
        inside = world_comm.Get_rank() < ranks
        sub = world_comm.Split(0 if inside else MPI.UNDEFINED, world_comm.Get_rank())
        if inside:
            equal(name, width, height, sub, volume, tf, reference)
            sub.Free()
        world_comm.Barrier()


def equal(name: str, width: int, height: int, comm=None, volume=None, tf=None,
          reference=None) -> None:
    comm = world() if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if volume is None:
        volume, tf = load_everywhere(name, None, comm)
    renderer = DistributedRenderer(volume, tf, comm, timeout=60.0)
    if rank == 0 and reference is None:
        from raytracer.volume.raycaster import Raycaster

        whole = Raycaster(volume, tf)
        reference = [whole.render(c, width, height, 1.0, 1.0).rgba for c in views(volume.radius)]
    settings = FrameSettings(step=1.0, image_scale=1.0, ert_threshold=1.0)
    worst, frames = 0.0, 0
    for algorithm in ALGORITHMS:
        renderer.algorithm = algorithm
        for i, camera in enumerate(views(volume.radius)):
            out = renderer.render_frame(camera, width, height, settings)
            if rank == 0:
                err = float(np.abs(out.image - reference[i]).max())
                worst = max(worst, err)
                if err > 1e-5:
                    raise AssertionError(f"{algorithm} view {i}: max |d| {err:.3g} > 1e-5")
                rec = out.record
                assert rec is not None and len(rec.ranks) == size
                assert sorted(rec.order) == list(range(size))
                frames += 1
            else:
                assert out.image is None and out.record is None
    out = renderer.render_frame(views(volume.radius)[3], width, height, FrameSettings(0.5, 0.5))
    if rank == 0:
        rec = out.record
        assert out.image.shape == (height, width, 4)
        assert (rec.render_width, rec.render_height) == (width // 2, height // 2)
        assert rec.frame_seconds >= rec.ranks[0].render_seconds > 0 and rec.render_max > 0
        assert all(r.samples >= 0 and len(r.stages) == len(rec.ranks[0].stages) for r in rec.ranks)
        assert all(r.group_samples >= r.samples and r.group_ratio >= 1.0 for r in rec.ranks)
        sent = sum(s.bytes_sent for r in rec.ranks for s in r.stages)
        received = sum(s.bytes_received for r in rec.ranks for s in r.stages)
        assert sent == received and (size == 1 or sent > 0)
        print(f"OK ranks={size} frames={frames} max={worst:.2e}", flush=True)


def bad(name: str) -> None:
    rank = world().Get_rank()
    try:
        load_everywhere(name if rank == 1 else "marschner-lobb:8")
    except AgreedError as exc:
        print(f"rank {rank} raised: {exc}", flush=True)
        return
    print(f"rank {rank} did not raise", flush=True)


def main(argv: list[str]) -> int:
    install_excepthook()
    if argv[0] == "equal":
        equal(argv[1], int(argv[2]), int(argv[3]))
    elif argv[0] == "equal-all":
        equal_all(argv[1], int(argv[2]), int(argv[3]), [int(n) for n in argv[4].split(",")])
    elif argv[0] == "bad":
        bad(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
