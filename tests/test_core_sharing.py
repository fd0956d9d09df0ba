"""Ranks sharing a machine's cores finish by processor sharing, by core group where pinned."""

import numpy as np
import pytest

from models.core_sharing import shared_finish


def test_ranks_sharing_cores_finish_by_processor_sharing():
    work = np.array([[1.0], [3.0], [2.0], [2.0]])  # CPU seconds of 4 ranks, one thread each
    np.testing.assert_allclose(shared_finish(work, cores=np.inf)[:, 0], [1, 3, 2, 2])
    # 2 cores for 4 ranks: all at half speed until the first is done at t=2, then the three
    # others at 2/3 speed until the 2-second ones are done (t=3.5), then the last alone
    finish = shared_finish(work, cores=2.0)[:, 0]
    np.testing.assert_allclose(finish, [2.0, 4.5, 3.5, 3.5])
    assert finish.max() == pytest.approx(work.sum() / 2 + 0.5)
    two_threads = shared_finish(np.array([[4.0]]), cores=2.0, threads=2.0)
    assert two_threads[0, 0] == pytest.approx(2.0)
    # pinned round robin, a core each for ranks (0, 2) and (1, 3): a core whose ranks are
    # done does not help the other's
    pinned = shared_finish(work, cores=2.0, core_groups=(0, 1, 0, 1))[:, 0]
    np.testing.assert_allclose(pinned, [2.0, 5.0, 3.0, 4.0])
    with pytest.raises(ValueError, match="core group per rank"):
        shared_finish(work, cores=2.0, core_groups=(0, 1))
