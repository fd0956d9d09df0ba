"""``bench volume-tuned``'s fixed setup: the volumes of each data set, the mid-run target drop,
and the mark of the MPI job's result line."""

from __future__ import annotations

MARK = "RESULT "
TARGET_DROP = 0.7  # the mid-run target change: to 70 % of the target
CALIBRATION_VOLUME = "bonsai"  # the governed volume, calibrated on
CALIBRATION_ALSO = ("ironprot",)  # a small volume beside it: what the cache is worth
#: aneurism and neghip are 8-bit scans (read as byte cells); field:96 is float data, the
#: ray caster's other kernel variant, as headsq (16-bit) in the test set is
VALIDATION_VOLUMES = ("aneurism", "neghip", "field:96")
TEST_VOLUMES = ("tooth", "headsq")
