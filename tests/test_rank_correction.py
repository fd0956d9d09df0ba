"""Each rank's render-cost correction: a shrunk geometric mean of measured / predicted."""

import copy

import numpy as np
import pytest

from models.rank_correction import RankCorrection


def test_correction_moves_towards_each_ranks_ratio_as_frames_come():
    c = RankCorrection(2, prior_frames=4.0)
    assert c.factor.tolist() == [1.0, 1.0]
    for frames in range(1, 41):
        c.observe([1.5, 0.8], [1.0, 1.0])
        expected = np.exp(np.log([1.5, 0.8]) * frames / (frames + 4.0))
        np.testing.assert_allclose(c.factor, expected)
    assert c.factor == pytest.approx([1.5, 0.8], rel=0.05)  # near the ratio, never past it


def test_a_rank_with_nothing_measured_or_predicted_teaches_nothing():
    c = RankCorrection(3, prior_frames=1.0)
    c.observe([2.0, 0.0, np.nan], [1.0, 1.0, 1.0])
    c.observe([2.0, 3.0, 3.0], [1.0, 0.0, -1.0])
    np.testing.assert_allclose(c.factor, [np.exp(2 * np.log(2.0) / 3), 1.0, 1.0])


def test_a_shallow_copy_keeps_the_factor_as_it_was():
    c = RankCorrection(1)
    c.observe([2.0], [1.0])
    before = copy.copy(c)
    c.observe([4.0], [1.0])
    assert before.factor[0] == pytest.approx(np.exp(np.log(2.0) / 5))
    assert c.factor[0] > before.factor[0]


def test_a_correction_stops_learning_once_every_rank_has_its_frames():
    from models.rank_correction import LEARNING_FRAMES

    c = RankCorrection(2)
    for _ in range(LEARNING_FRAMES - 1):
        c.observe([1.2, 1.2], [1.0, 1.0])
    assert c.learning
    c.observe([1.2, 0.0], [1.0, 1.0])  # rank 1 timed nothing: it still has a frame to learn
    assert c.learning
    c.observe([1.2, 1.2], [1.0, 1.0])
    assert not c.learning
