"""The BSP-based GPU model (Amarís et al., after Eqs. 3-5): a kernel's time from counts.

The paper: Amarís, de Camargo, Dyab, Goldman, Trystram, "A Comparison of GPU Execution Time
Prediction using Machine Learning and Analytical Modeling".

``T_k = t * (Comp + CommGM + CommSM) / (R * P * lambda)`` (Eq. 3) with
``CommSM = (ld0 + st0) * g_SM`` (Eq. 4) and
``CommGM = (ld1 + st1 - L1 - L2) * g_GM + L1 * g_L1 + L2 * g_L2`` (Eq. 5; the minus signs are
lost in the paper's printing, the authors' own code has them). ``t`` threads, per-thread cycles
of computation ``Comp``, per-thread loads/stores to global (``ld1``, ``st1``) and shared
(``ld0``, ``st0``) memory, cache hits ``L1``, ``L2`` (0 in the paper), clock ``R`` (Hz), cores
``P``. ``lambda`` is fitted from one measured run per kernel and device
(:func:`fit_lambda`: ``T_k(lambda=1) / T_measured``).

Because lambda is fitted per kernel, a constant factor in a kernel's counts cancels: only how
the counts grow with the size ``n`` and the thread count matters. That is why the paper's
garbled ``st1`` row (printed ``1 2 1 N`` for five column groups) is read here as one store per
thread for every kernel but MSA (``n``, its printed last entry): the ``2`` would only scale one
kernel's constant, which lambda absorbs. :func:`seed_counts` says what it reads for each row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The paper's constants (cycles): FMA, add and mul as measured by its micro-benchmarks, and the
# shared- and global-memory latencies.
FMA_CYCLES, ADD_CYCLES, MUL_CYCLES = 1.0, 24.0, 96.0
G_SM, G_GM, G_L1, G_L2 = 5.0, 500.0, 0.0, 0.0

SEED_KERNELS = ("MMGU", "MMGC", "MMSU", "MMSC", "MAU", "MAC", "vAdd", "dotP", "MSA")


@dataclass(frozen=True)
class ThreadCounts:
    """Per-thread work of one kernel launch (the paper's Table III parameters)."""

    comp: float  # cycles of computation
    ld1: float  # global loads
    st1: float  # global stores
    ld0: float = 0.0  # shared loads
    st0: float = 0.0  # shared stores
    l1: float = 0.0  # L1 hits
    l2: float = 0.0  # L2 hits


def comm_sm(c: ThreadCounts, g_sm: float = G_SM) -> float:
    """Eq. 4: shared-memory cycles of one thread."""
    return (c.ld0 + c.st0) * g_sm


def comm_gm(c: ThreadCounts, g_gm: float = G_GM, g_l1: float = G_L1, g_l2: float = G_L2) -> float:
    """Eq. 5: global-memory cycles of one thread (cache hits paid at their own latency)."""
    return (c.ld1 + c.st1 - c.l1 - c.l2) * g_gm + c.l1 * g_l1 + c.l2 * g_l2


def bsp_seconds(c: ThreadCounts, threads: float, clock_hz: float, cores: float,
                lam: float = 1.0) -> float:
    """Eq. 3: predicted kernel seconds."""
    for name, value in (("threads", threads), ("clock_hz", clock_hz), ("cores", cores),
                        ("lambda", lam)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be finite and > 0, got {value!r}")
    return threads * (c.comp + comm_gm(c) + comm_sm(c)) / (clock_hz * cores * lam)


def fit_lambda(unit_seconds: float, measured_seconds: float) -> float:
    """Lambda from one run: the prediction with lambda = 1 over the measured time."""
    if not (unit_seconds > 0 and measured_seconds > 0):
        raise ValueError(f"times must be > 0, got {unit_seconds!r} and {measured_seconds!r}")
    return unit_seconds / measured_seconds


def seed_counts(kernel: str, n: int, threads_per_block: int) -> ThreadCounts:
    """Table III for one kernel at size ``n`` (matrix side, or vector length) as the notes read it.

    comp: MM ``n`` FMAs; MA and vAdd one add (24); dotP one mul (96); MSA ``(n / t) * 100``.
    ld1: MM ``2 n``; MA, vAdd, dotP 2; MSA ``n / t``. st1: 1, MSA ``n`` (garbled in the seed).
    ld0: MMS* ``2 n``, MSA ``n / t``. st0: MMS* 1, dotP ``1 + log2(t)``, MSA 5. ``t`` is the
    block's thread count.
    """
    if kernel not in SEED_KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; one of {SEED_KERNELS}")
    if n < 1 or threads_per_block < 1:
        raise ValueError(f"n and threads_per_block must be >= 1, got {n!r}, {threads_per_block!r}")
    t = float(threads_per_block)
    if kernel.startswith("MM"):
        shared = kernel.startswith("MMS")
        return ThreadCounts(n * FMA_CYCLES, 2.0 * n, 1.0, 2.0 * n if shared else 0.0,
                            1.0 if shared else 0.0)
    if kernel in ("MAU", "MAC", "vAdd"):
        return ThreadCounts(ADD_CYCLES, 2.0, 1.0)
    if kernel == "dotP":
        return ThreadCounts(MUL_CYCLES, 2.0, 1.0, 0.0, 1.0 + math.log2(t))
    return ThreadCounts(n / t * 100.0, n / t, float(n), n / t, 5.0)
