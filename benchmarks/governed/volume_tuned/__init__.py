"""The tuner holding the distributed volume renderer at a target: model error and governed runs.

One ``mpiexec -n R python -m mpi4py -m benchmarks.governed.volume_tuned --worker`` job, one rank per
core by default (2 here; each rank's OpenCL device on its share of the cores). A run with more
ranks than cores is labelled *oversubscribed* and judged against its own, looser goal. Rank 0
prints its figures as one JSON line; this launcher adds the goals block and plots.

Data sets, fixed before the model work (a model is judged on frames it was not fitted on), the
volumes named by :mod:`governed.volume.volume_sets`:

* **calibration**: random knobs at calibration views (random directions off the orbit plane,
  :func:`volume_calibration_views`) of every calibration volume, on the cell-count partition
  (imbalanced: bonsai's bricks hold very different amounts of non-empty data) and on the
  cost-balanced one (each calibrated on its own);
  ``--calibrate-on bonsai`` calibrates on bonsai alone;
* **validation** (used to design the model and the controller): the orbit of bonsai from the
  cluster study (Tkachev et al., "Prediction of Distributed Volume Visualization Performance
  to Support Render Hardware Acquisition"; held-out cameras) with random knobs, close-up views
  that put most samples on one rank, and the validation volumes under the models fitted on the
  calibration volumes;
* **test** (touched only to report): the test volumes, an orbit each with random knobs on both
  partitions and in the two imbalanced scenarios of the per-process analytical model
  (HemoCell study): half the ranks holding 3x the cells, and all the content on half the
  ranks, under the models calibrated on the cell-count partition, beside the study's own
  errors; and a governed orbit of the first test volume.

Each validation and test volume's orbit is priced twice: by the models fitted on bonsai
(what a model carries to a volume it never saw) and by a model calibrated on that volume's
own calibration views, as many frames as ``autotune volume`` takes by default (what the command
and the viewer do with the volume they are given: they calibrate on it before the first
governed frame).

Governed runs: the cluster study's 72-frame double orbit of bonsai at a target of half the first
view's full-quality time, for the feed-forward tuner and both baselines (fixed knobs tuned by
measurement on the first frame to within 1 %; PI over the same quality-ranked settings with
gains tuned on a training orbit, elevated, not the evaluated one), quality (PSNR/SSIM
against the full-quality frame) every few frames; the same for feed-forward on the first
test volume; recovery (frames) after the target drops to 70 % mid-run and after the volume
is swapped mid-run; the noise floor: one view rendered 24 times at the fixed baseline's knobs;
the oracle on both governed paths (every 6th view: the best setting whose median of 3 frames
fits the target, its error measured on 3 fresh frames), which the governed goals are judged
against where it is above them, and feed-forward's error as a multiple of the oracle's.

Controlled time: rank 0's frame, from the probe to the final upscaled image (probe + choice +
knob broadcast + local render + compositing + gather + upscale).

This module is the launcher; the job's model error is
:mod:`~benchmarks.governed.volume_tuned.model_error`, its governed runs and entry
:mod:`~benchmarks.governed.volume_tuned.runs`, the goals and plot
:mod:`~benchmarks.governed.volume_tuned.report`, its fixed settings
:mod:`~benchmarks.governed.volume_tuned.run_constants`.
"""

from benchmarks.governed.volume_tuned.command import main

__all__ = ["main"]
