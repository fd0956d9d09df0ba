"""PSNR and SSIM: known values, monotone in the damage, shape errors."""

import math

import numpy as np
import pytest

from common.image_quality import psnr, ssim


def test_identical_images():
    img = np.random.default_rng(0).random((32, 48, 3))
    assert psnr(img, img) == math.inf
    assert ssim(img, img) == pytest.approx(1.0)


def test_psnr_of_known_noise():
    ref = np.zeros((64, 64))
    assert psnr(ref + 0.1, ref) == pytest.approx(20.0)


def test_more_damage_scores_lower():
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:64, 0:64]
    ref = np.stack([np.sin(xx / 5.0) * 0.5 + 0.5] * 3, axis=-1)
    light = ref + rng.normal(0, 0.02, ref.shape)
    heavy = ref + rng.normal(0, 0.2, ref.shape)
    assert psnr(light, ref) > psnr(heavy, ref)
    assert 1.0 > ssim(light, ref) > ssim(heavy, ref)


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shape"):
        ssim(np.zeros((4, 4)), np.zeros((4, 5)))
