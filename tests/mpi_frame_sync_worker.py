"""Worker run under ``mpiexec -n K python -m mpi4py`` by tests/test_frame_sync.py.

Rank 0 shares a known pattern of frame states (cameras, targets, knobs, sizes, controller
indices, tuning switches, a state without a camera, an exit status); every other rank
restores each one, alternately waiting inside a collective block (``share``) and idling
between frames (``receive``), and checks it against the same pattern computed locally.
Each rank prints ``OK rank=R states=N`` when every state matched.
"""

from __future__ import annotations

import sys

from raytracer.camera import Camera
from raytracer.mpi.faults import install_excepthook, world
from raytracer.volume.distributed import FrameSettings
from raytracer.volume.frame_sync import CALIBRATE, DONE, FRAME, QUIT, FrameState, FrameSync

OPS = (FRAME, FRAME, CALIBRATE, FRAME, DONE, FRAME, QUIT)


def pattern(i: int) -> FrameState:
    """State ``i`` of the sequence; the last one is QUIT with status 130."""
    op = OPS[i]
    camera = None
    if op == FRAME:
        camera = Camera((1.5 * i, -2.25 * i, 3.0 + i), (0.125 * i, 0.0, -0.5),
                        (0.0, 1.0, 0.0) if i % 2 else (0.0, 0.0, 1.0), 30.0 + i)
    return FrameState(op, camera, target=0.0375 * (i + 1),
                      settings=FrameSettings(1.0 / (0.25 + 0.5 * i), 0.5 + 0.0625 * i,
                                             1.0 - 0.0125 * i),
                      width=64 + 3 * i, height=48 + 5 * i, controller=i % 3,
                      tuning=bool(i % 2), status=130 if op == QUIT else 0)


def main() -> int:
    install_excepthook()
    comm = world()
    rank = comm.Get_rank()
    sync = FrameSync(comm, shares_core="--shares-core" in sys.argv)
    count = 0
    for i in range(len(OPS)):
        expected = pattern(i)
        if rank == 0:
            got = sync.share(expected)
        elif i % 2:
            got = sync.receive()  # idling between frames
        else:
            got = sync.share(None)  # inside a collective block
        if got != expected:
            print(f"MISMATCH rank={rank} state={i}: {got} != {expected}", flush=True)
            return 1
        count += 1
    print(f"OK rank={rank} states={count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
