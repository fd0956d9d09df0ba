"""``bench volume-tuned``'s fixed run settings: the mid-run target drop, how often a compared
run's image quality is measured, the names of the HemoCell
study's imbalanced scenarios (run by ``model_error``, read by ``report``) and the mark of the
MPI job's result line (its volumes: :mod:`governed.volume.volume_sets`)."""

from __future__ import annotations

MARK = "RESULT "
TARGET_DROP = 0.7  # the mid-run target change: to 70 % of the target
QUALITY_EVERY = 6  # the frames of a compared controller's run whose SSIM and PSNR are measured
SUBDOMAINS_3TO1 = "subdomains_3to1"  # half the ranks hold 3x the cells
CONTENT_ON_HALF = "content_on_half_the_ranks"  # the content on the first half of the ranks
SEED_CASES = (SUBDOMAINS_3TO1, CONTENT_ON_HALF)
