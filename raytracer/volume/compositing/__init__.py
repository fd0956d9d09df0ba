"""Sort-last compositing of per-rank premultiplied RGBA images over MPI (mpi4py buffers).

Every rank holds a full-size float32 RGBA image of its own brick. Given the front-to-back
visibility order of ranks (a list of rank ids, the same on every rank), :func:`composite`
blends them into one image and gathers it to rank 0.

Three algorithms, one module each behind one interface (:class:`~.base.Schedule`: a pure
function of (P, pixels, k) giving stages of groups in virtual ranks, identical on every rank):

- ``"binary-swap"`` (``binary_swap``; Ma et al. 1994): pairs swap halves, log2 P rounds;
- ``"2-3-swap"`` (``two_three_swap``; Yu, Wang, Ma, SC08; the compositing of the cluster
  study, Tkachev et al., "Prediction of Distributed Volume Visualization Performance to Support
  Render Hardware Acquisition"): groups of 2 or 3, any P, floor(log2 P) stages;
- ``"radix-k"`` (``radix_k``; Peterka et al. 2009; IceT's default, k = 8): rounds of at most
  k ranks by direct send.

``schedules`` registers them by name; ``engine`` runs any of them (MPI exchange per stage,
the gather to rank 0, and a serial twin that gives the exact reference); ``base`` holds the
stages, spans and timings they share. Two transports carry a stage's spans and the gather:
messages (Isend/Irecv, ``Gatherv``), or, where every rank shares one node, an MPI-3 shared
window that ranks blend from in place (``shared_window``; ``transport="auto"`` picks it).

Timings: every rank records, per stage, its wall seconds, the part spent blending, bytes
sent and received and the real ranks it exchanged with; the same for the gather.
"""

from raytracer.volume.compositing.base import CompositeResult, Schedule, Span, Stage, StageTiming
from raytracer.volume.compositing.engine import (
    CHUNK_PIXELS,
    TAG_BASE,
    StagePlan,
    composite,
    composite_buffer,
    composite_serial,
    plan_stage,
    stage_partners,
)
from raytracer.volume.compositing.radix_k import factor_rounds
from raytracer.volume.compositing.schedules import ALGORITHMS, SCHEDULES, final_spans, schedule
from raytracer.volume.compositing.shared_window import TRANSPORTS

__all__ = [
    "ALGORITHMS",
    "CHUNK_PIXELS",
    "SCHEDULES",
    "TAG_BASE",
    "TRANSPORTS",
    "CompositeResult",
    "Schedule",
    "Span",
    "Stage",
    "StagePlan",
    "StageTiming",
    "composite",
    "composite_buffer",
    "composite_serial",
    "factor_rounds",
    "final_spans",
    "plan_stage",
    "schedule",
    "stage_partners",
]
