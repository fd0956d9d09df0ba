"""``autotune bench cluster-prediction``: predict a bigger or faster cluster (the cluster study).

The cluster study: Tkachev, Frey, Müller, Bruder, Ertl, "Prediction of Distributed Volume
Visualization Performance to Support Render Hardware Acquisition" (issues 14 and 20 here):
performance histograms, emulation and a small neural net.

Parts, each its own ``mpiexec`` job (``python -m mpi4py -m benchmarks.studies.cluster_prediction
--worker ...``, run by ``mpi_workers``), every rank's OpenCL device on one compute unit
(``AUTOTUNE_COMPUTE_UNITS=1``):

- ``term``: 2 ranks, ``Sendrecv`` at sizes 1 KiB..16 MiB and the numba "over" blend rate:
  latency, bandwidth and blend rate of the compositing term (studies/cluster_prediction/model.py),
  once on shared memory (``shm``) and once on the "slow network" (``slow``: every message pays
  an emulated link of 2 ms + bytes / 100 MB/s, studies/cluster_prediction/emulation.py
  SlowLinks).
- ``real``: the ray caster renders the study's orbit on 1..8 ranks (sub-communicators of one
  job) at each image size, on shared memory, at sample step 1 (the *current node*) and
  step 3 (the *faster node*: a third of the samples). Per frame: every rank's local render
  seconds and rank 0's frame time, the median of ``real_repeats`` passes (each its own job,
  its ranks pinned one per core as the product pins them). These are the targets of every
  prediction.
- ``node``: the cheap measurement of a node on its own: one process renders each brick of a
  P-rank partition in turn (no compositing, no other rank), on the study's orbit turned by
  NODE_PHASE of a view step (another camera path: none of the real runs' views), both steps.
  The features of every test row come from these histograms, never from the real run being
  predicted.
- ``emulate``: emulation runs (studies/cluster_prediction/emulation.py) over image size x rank
  count (1..32) x histogram (the current node's from its node runs, measured as the test
  rows' features are, and generated from them: x0.7 and x0.5, x0.6 with --quick; perturbed)
  x mode (one histogram, per-frame histograms) x network; emulation of the current node's real
  runs from their own render times (one histogram, per-frame histograms, per-rank mean
  vectors: the fidelity of emulation), and of the faster node's node-run histograms.
  Rows are appended to the training-data file atomically as they finish; a rerun skips
  the rows already there.

Then the cluster models are trained (16+8 ReLU MLP, λ on the fastest generated histograms'
rows, held out; with and without the compositing term) on emulation rows of the current node
only, and the experiments:

- *upgrade*: predicts the faster node's real runs (never seen: no histogram of them is made)
  from its node-run histograms;
- *faster network*: trained on slow-network emulation rows only, predicts real runs on shared
  memory by swapping the compositing term (goal on the faster node, nothing of which was
  seen; the current node's real runs, whose render times made the training histograms,
  scored apart);
- *vectors vs histograms* and *per-frame histograms*: emulation against the real runs whose
  own render times it emulates (the fidelity of emulation, the study's Fig. 5; not a
  prediction);
- *learning curve* (the study's Fig. 4b: upgrade R² against training rows) and *network sweep*
  (the study's Table 1: hidden shapes x λ, validation and upgrade test scores);
- *beyond this machine*: 64..1024 ranks, on paper.

Controlled time: rank 0's frame time (frame start to the final composited image), mean over
the path. Accuracy goals use the real runs with one rank per core; runs with more ranks than
cores share cores (their render times include it, the node runs' do not) and are scored
apart as ``oversubscribed``. Emulation above that many ranks composites under
oversubscription (MPICH told to yield). Every JSON records others_share (the ``run`` block).
"""

from benchmarks.studies.cluster_prediction.command import main

__all__ = ["main"]
