"""The frame protocol (raytracer/volume/frame_sync.py): one fixed-layout vector per step.

In one process a state packs and restores exactly; over 2 and 3 MPI ranks rank 0's pattern of
states arrives intact on every other rank, whether it waits in a collective block or idles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from raytracer.camera import Camera
from raytracer.mpi.faults import world
from raytracer.mpi.launch import launch, mpiexec_path
from raytracer.volume.distributed import FrameSettings
from raytracer.volume.frame_sync import FRAME, QUIT, SIZE, FrameState, FrameSync

REPO = Path(__file__).resolve().parents[1]
WORKER = str(Path(__file__).with_name("mpi_frame_sync_worker.py"))
needs_mpiexec = pytest.mark.skipif(
    mpiexec_path() is None, reason="mpiexec not installed (pip install mpich)"
)


def test_a_state_packs_into_one_vector_and_back():
    state = FrameState(FRAME, Camera((1.0, 2.0, 3.0), (0.1, -0.2, 0.3), (0.0, 0.0, 1.0), 40.0),
                       0.05, FrameSettings(0.7, 0.5, 0.95), 96, 72, 2, False, 0)
    packed = state.pack()
    assert packed.shape == (SIZE,) and packed.dtype == np.float64
    assert FrameState.unpack(packed) == state
    quit_state = FrameState.unpack(FrameState(QUIT, status=130).pack())
    assert quit_state.camera is None and (quit_state.op, quit_state.status) == (QUIT, 130)


def test_one_process_shares_without_mpi():
    sync = FrameSync(world())
    state = FrameState(QUIT, status=2)
    assert sync.share(state) is state
    with pytest.raises(ValueError, match="rank 0 must give"):
        sync.share(None)


@needs_mpiexec
@pytest.mark.parametrize("ranks, shares_core", [(2, False), (3, False), (3, True)])
def test_rank_0_pattern_is_restored_on_every_rank(ranks, shares_core):
    """Also where waiting ranks sleep between polls inside a block (ranks sharing cores)."""
    done = launch([WORKER] + (["--shares-core"] if shares_core else []), ranks,
                  timeout=120, cwd=REPO, env={"PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stdout + done.stderr
    for rank in range(ranks):
        assert f"OK rank={rank} states=7" in done.stdout, done.stdout
