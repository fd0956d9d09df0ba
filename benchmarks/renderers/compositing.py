"""Sort-last compositing speed: binary swap, 2-3 swap and radix-k over mpi4py, against memcpy
and the raw 2-rank ``Sendrecv`` bandwidth measured in the same run.

Each part runs as its own
``mpiexec -n K python -m mpi4py -m benchmarks.renderers.compositing --worker`` job (started
by :func:`raytracer.mpi.launch.launch`); rank 0 prints its figures as one JSON line. Images
are full-size premultiplied RGBA float32 with random content (the cost of compositing does
not depend on the pixel values: every pixel is blended).

Each composite starts from the rank's image in :func:`composite_buffer` (copied there
untimed, as if rendered there): on the default transport ("auto", here one node) that is the
rank's slot of the shared window, which compositing works in without a copy; on "messages" a
new array, as before the shared transport existed.

- ``reference``: 2 ranks, 2048² (1024² with ``--quick``): ``np.copyto`` of the whole image
  (64 MiB), ``Sendrecv`` of half an image each way, the numba "over" blend rate, binary swap
  + gather to rank 0 on the default transport (``binary_swap_gather``) and on messages
  (``binary_swap_gather_messages``: ``Isend``/``Irecv`` + ``Gatherv``; the research reference
  measured here: 26 ms at 2048²), and one synchronisation of the shared window
  (``shared_sync_us``). Compositing rate = bytes rank 0 receives in the whole composite
  (swap + gather) / its composite seconds; ``vs_memcpy`` compares both transports' with
  memcpy. The part runs ``--runs`` times (5; each a new MPI job, so each gets its own fresh
  memory) and the goal asks the default transport's rate >= 50 % of memcpy in every run:
  ``reference`` keeps the first run's figures, ``reference_runs`` each run's rate and times.
- ``algorithms``: every algorithm at 1024² for 2..8 ranks (4 with ``--quick``), on the
  default transport and on messages (``"<algorithm> (messages)"``). Above 2 ranks this
  2-core machine is oversubscribed, so those times measure the schedule under contention,
  not a cluster; a performance model should be fitted on real nodes.

Times are medians over ``--repeats`` (after one warm-up); a collective's time is the slowest
rank's. Controlled time: the composite as rank 0 sees it (all stages + gather), i.e. the
compositing share of the frame time the tuner holds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from autotune_app import options as opt
from autotune_app.report import emit, pyplot
from benchmarks.harness.results import save_result
from benchmarks.harness.run_record import RunRecord, changed_options, stamp, variant_name
from benchmarks.renderers.compositing_forms import communication_ratio_forms
from common.atomic_files import check_output_dir, output_dir, save_figure
from raytracer.mpi.faults import install_excepthook
from raytracer.mpi.launch import launch
from raytracer.volume.compositing import ALGORITHMS, composite, composite_buffer
from raytracer.volume.compositing.shared_window import shared_images
from raytracer.volume.span_blend import kernels

#: the options a protocol run leaves at their defaults (the 2048² reference, 5 runs, 2-8 ranks)
PROTOCOL_OPTIONS = ("quick", "repeats", "max_ranks", "runs")
RESULTS_NAME = variant_name("compositing", {}, "cpu")  # in results/<machine>/
REFERENCE_2048_MS = 26.0  # 2-rank binary swap + gather at 2048², first dev machine
GOAL_RUNS = 5  # the rate must hold in this many consecutive reference runs (issue 51, item 5)
MARK = "RESULT "
# the reference part's binary swap + gather runs: (key, transport, image in composite_buffer);
# the goal is read on the first, the default transport as a renderer would use it
REFERENCE_RUNS = (
    ("binary_swap_gather", "auto", True),
    ("binary_swap_gather_messages", "messages", True),
)


# ------------------------------------------------------------------ inside the MPI job


def _image(npix: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    img = rng.random((npix, 4), dtype=np.float32)
    img[:, :3] *= img[:, 3:4]
    return img


def _median(xs: list[float]) -> float:
    return float(np.median(xs))


def _timed_composite(
    comm: Any, src: np.ndarray, order: list[int], algorithm: str, transport: str, in_window: bool
) -> dict:
    """One composite of ``src`` as the renderer hands it over: copied (untimed) into
    :func:`composite_buffer` (``in_window``: where a renderer would render) or into a new
    array. The slowest rank's total, stage and gather seconds (max over ranks), and rank 0's
    bytes received, blend seconds and which transport ran."""
    from mpi4py import MPI  # lazy: initialises MPI, inside the MPI job only

    work = composite_buffer(src.shape, comm, transport) if in_window else np.empty_like(src)
    np.copyto(work, src)
    comm.Barrier()
    result = composite(work, order, algorithm, comm, transport=transport)
    # the seconds, then per stage the partners, bytes (sent + received) and blended pixels
    # (what the volume model's stage terms take: models.volume_cost.StageModel), each the
    # most of any rank, in one reduction
    timed = len(result.stages) + 2
    stage_work = [[len(s.partners), s.bytes_sent + s.bytes_received, s.blended_pixels]
                  for s in result.stages]
    mine = np.array([result.seconds, *(s.seconds for s in result.stages),
                     result.gather.seconds, *np.ravel(stage_work)], np.float64)
    worst = np.empty_like(mine)
    comm.Allreduce(mine, worst, op=MPI.MAX)
    received = sum(s.bytes_received for s in result.stages) + result.gather.bytes_received
    return {
        "stage_work_max": worst[timed:].reshape(-1, 3).tolist(),
        "total": float(worst[0]),
        "stages": [float(x) for x in worst[1:timed - 1]],
        "gather": float(worst[timed - 1]),
        "rank0_seconds": result.seconds,
        "rank0_bytes_received": received,
        "rank0_blend_seconds": sum(s.blend_seconds for s in result.stages),
        "rank0_gather_seconds": result.gather.seconds,
        "stage_bytes_received_rank0": [s.bytes_received for s in result.stages],
        "stage_seconds_rank0": [s.seconds for s in result.stages],
        "names": [s.name for s in result.stages],
        "transport": result.transport,
    }


def _summarize(runs: list[dict]) -> dict[str, Any]:
    return {
        "total_ms": 1e3 * _median([r["total"] for r in runs]),
        "stages_ms": [
            1e3 * _median([r["stages"][i] for r in runs]) for i in range(len(runs[0]["stages"]))
        ],
        "stage_names": runs[0]["names"],
        "gather_ms": 1e3 * _median([r["gather"] for r in runs]),
        "rank0_ms": 1e3 * _median([r["rank0_seconds"] for r in runs]),
        "rank0_bytes_received": runs[0]["rank0_bytes_received"],
        "rank0_blend_ms": 1e3 * _median([r["rank0_blend_seconds"] for r in runs]),
        "rank0_gather_ms": 1e3 * _median([r["rank0_gather_seconds"] for r in runs]),
        "transport": runs[0]["transport"],
        "stage_work_max": runs[0]["stage_work_max"],  # the schedule's: the same every run
        "_runs": runs,
    }


def worker_reference(size: int, repeats: int) -> dict[str, Any] | None:
    """2 ranks: memcpy, Sendrecv, blend rate, binary swap + gather of a size² image."""
    from mpi4py import MPI  # lazy: initialises MPI, inside the MPI job only

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != 2:
        raise SystemExit("the reference part needs exactly 2 ranks")
    npix = size * size
    src = _image(npix, rank)
    out: dict[str, Any] = {"size": size, "pixels": npix, "image_bytes": src.nbytes}

    # memcpy of the whole image (rank 0; rank 1 waits at the barrier, idle)
    if rank == 0:
        dst = np.empty_like(src)
        np.copyto(dst, src)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            np.copyto(dst, src)
            times.append(time.perf_counter() - t)
        out["memcpy_GBps"] = src.nbytes / _median(times) / 1e9
        over, _ = kernels()
        half = src.reshape(-1)[: src.size // 2]
        back = dst.reshape(-1)[: src.size // 2]
        over(half, back)
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            over(half, back)
            times.append(time.perf_counter() - t)
        out["blend_Mpx_per_s"] = (npix // 2) / _median(times) / 1e6
    comm.Barrier()

    # Sendrecv of half an image each way (what one binary-swap round moves)
    flat = src.reshape(-1)
    n = flat.size // 2
    send = flat[n:] if rank == 0 else flat[:n]
    recv = np.empty(n, np.float32)
    peer = 1 - rank
    times = []
    for i in range(repeats + 1):
        comm.Barrier()
        t = time.perf_counter()
        comm.Sendrecv([send, MPI.FLOAT], peer, 11, [recv, MPI.FLOAT], peer, 11)
        if i:
            times.append(time.perf_counter() - t)
    out["sendrecv_GBps"] = send.nbytes / _median(times) / 1e9
    out["sendrecv_ms"] = 1e3 * _median(times)

    for key, transport, in_window in REFERENCE_RUNS:
        runs = [
            _timed_composite(comm, src, [0, 1], "binary-swap", transport, in_window)
            for _ in range(repeats + 1)
        ][1:]
        summary = _summarize(runs)
        swap_bytes = runs[0]["stage_bytes_received_rank0"][0]
        swap_s = _median([r["stage_seconds_rank0"][0] for r in runs])
        summary["swap_GBps"] = swap_bytes / swap_s / 1e9
        summary["composite_GBps"] = (
            summary["rank0_bytes_received"] / (summary["rank0_ms"] / 1e3) / 1e9
        )
        summary.pop("_runs")
        out[key] = summary
    out["shared_sync_us"] = _sync_us(comm, repeats)
    return out if rank == 0 else None


def _sync_us(comm: Any, repeats: int) -> float:
    """Median microseconds of one synchronisation of the shared window (Win_sync, barrier,
    Win_sync: what the shared transport pays per stage and twice per gather)."""
    shared = shared_images(comm, "shared")
    times = []
    for _ in range(100 * repeats):
        t = time.perf_counter()
        shared.sync()
        times.append(time.perf_counter() - t)
    return 1e6 * _median(times)


def worker_algorithms(size: int, repeats: int) -> dict[str, Any] | None:
    """Every algorithm at size² on this job's ranks (rank order front to back)."""
    from mpi4py import MPI  # lazy: initialises MPI, inside the MPI job only

    comm = MPI.COMM_WORLD
    rank, ranks = comm.Get_rank(), comm.Get_size()
    src = _image(size * size, rank)
    order = list(range(ranks))
    out: dict[str, Any] = {}
    for transport in ("auto", "messages"):
        for algorithm in ALGORITHMS:
            runs = [
                _timed_composite(comm, src, order, algorithm, transport, True)
                for _ in range(repeats + 1)
            ][1:]
            summary = _summarize(runs)
            summary.pop("_runs")
            out[algorithm if transport == "auto" else f"{algorithm} (messages)"] = summary
    return out if rank == 0 else None


def worker_main(argv: list[str]) -> int:
    """Entry point inside the MPI job."""
    install_excepthook()
    part, size, repeats = argv[0], int(argv[1]), int(argv[2])
    result = (worker_reference if part == "reference" else worker_algorithms)(size, repeats)
    if result is not None:
        print(MARK + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------- the launcher


def run_part(part: str, ranks: int, size: int, repeats: int) -> dict[str, Any]:
    """Run one part of this benchmark on ``ranks`` MPI ranks; rank 0's figures."""
    done = launch(
        ["benchmarks.renderers.compositing", "--worker", part, str(size), str(repeats)],
        ranks,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    for line in done.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    raise RuntimeError(
        f"compositing benchmark part {part!r} on {ranks} ranks failed "
        f"(exit {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )


def plot(figures: dict[str, Any], path: Path) -> None:
    """Composite time (stages + gather) per algorithm against the rank count, at 1024²."""
    plt = pyplot()
    algos = figures["algorithms_1024"]
    counts = sorted(int(n) for n in algos)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name in next(iter(algos.values())):
        style = "o--" if name.endswith("(messages)") else "o-"
        ax.plot(counts, [algos[str(n)][name]["total_ms"] for n in counts], style, label=name)
    ax.plot(counts, [algos[str(n)]["radix-k"]["gather_ms"] for n in counts], "k:",
            label="gather alone (radix-k)")
    cores = figures["machine"]["cores"]
    ax.set_ylim(bottom=0)
    ax.axvline(cores + 0.5, color="grey", lw=0.8)
    ax.text(cores + 0.6, 1.0, f"more ranks than the {cores} cores \u2192", va="bottom",
            fontsize=8, color="grey")
    ax.set_xlabel("ranks")
    ax.set_ylabel("composite + gather (ms)")
    ax.set_title(
        "Sort-last compositing of 1024² RGBA float32 (mpi4py, MPICH)\n"
        "solid: shared window (default here), dashed: messages",
        fontsize=10,
    )
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def add_ratios(ref: dict[str, Any]) -> None:
    """The reference part's rates as shares of each other (in place)."""
    ref["composite_vs_sendrecv"] = (
        ref["binary_swap_gather"]["composite_GBps"] / ref["sendrecv_GBps"]
    )
    ref["sendrecv_vs_memcpy"] = ref["sendrecv_GBps"] / ref["memcpy_GBps"]
    ref["vs_memcpy"] = {
        key: ref[key]["composite_GBps"] / ref["memcpy_GBps"] for key, _, _ in REFERENCE_RUNS
    }


def run_summary(ref: dict[str, Any]) -> dict[str, Any]:
    """One reference run's figures that the goals read (``ref`` after :func:`add_ratios`)."""
    bsg = ref["binary_swap_gather"]
    return {"vs_memcpy": ref["vs_memcpy"]["binary_swap_gather"], "total_ms": bsg["total_ms"],
            "swap_ms": bsg["stages_ms"][0], "memcpy_GBps": ref["memcpy_GBps"]}


def goals(figures: dict[str, Any]) -> dict[str, Any]:
    """The goals block, computed from the figures: the compositing rate must hold in every one
    of the consecutive reference runs (``reference_runs``), not in a lucky one."""
    ref, runs = figures["reference"], figures["reference_runs"]
    worst_share = min(r["vs_memcpy"] for r in runs)
    worst_ms = max(r["total_ms"] for r in runs)
    judged = len(runs) >= GOAL_RUNS
    out: dict[str, Any] = {
        "compositing_vs_memcpy": {
            "value": worst_share,
            "goal": f">= 0.5 in each of >= {GOAL_RUNS} consecutive runs",
            "met": bool(worst_share >= 0.5) if judged else None,
            **({} if judged else {"not_judged": f"the goal is judged on {GOAL_RUNS} "
                                                f"consecutive runs; this one made {len(runs)} "
                                                f"(--runs)"}),
            "runs": len(runs),
            "what": "smallest over the consecutive reference runs of: bytes rank 0 receives in "
            "binary swap + gather per second, as a share of np.copyto bytes/s measured in the "
            f"same run ({ref['size']}², 2 ranks; default transport: "
            f"{ref['binary_swap_gather']['transport']}, image rendered into composite_buffer)",
        },
    }
    if ref["size"] == 2048:
        out["bswap_gather_2048_ms"] = {
            "value": worst_ms,
            "goal": f"<= {1.5 * REFERENCE_2048_MS:g}",
            "met": bool(worst_ms <= 1.5 * REFERENCE_2048_MS),
            "what": "slowest over the reference runs of the 2-rank binary swap + gather of "
            "2048² (research reference 26 ms; regression bar 1.5x)",
        }
    return out


def parser() -> argparse.ArgumentParser:
    """The benchmark's options; the protocol is every option of :data:`PROTOCOL_OPTIONS` at
    its default."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1024² reference, 2-4 ranks")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (median)")
    parser.add_argument("--max-ranks", type=int, default=None, help="largest rank count")
    parser.add_argument("--runs", type=int, default=None, help="consecutive reference runs, "
                        f"each its own MPI job (default {GOAL_RUNS}; 1 with --quick)")
    parser.add_argument("--save", action="store_true",
                        help=f"also write results/<machine>/{RESULTS_NAME} (with the options "
                        "set away from their defaults before _cpu: such a run decides no goal)")
    opt.add_plots(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print a table or JSON (``--json``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    options = parser()
    args = options.parse_args(argv)
    changed = changed_options(options, args, PROTOCOL_OPTIONS)
    if args.runs is not None and args.runs < 1:
        options.error(f"--runs must be >= 1, got {args.runs}")
    if args.plots:
        check_output_dir(args.plots, args.force)  # before the runs, not after

    run = RunRecord()
    repeats = args.repeats or (3 if args.quick else 7)
    ref_size = 1024 if args.quick else 2048
    max_ranks = args.max_ranks or (4 if args.quick else 8)
    counts = list(range(2, max_ranks + 1))
    reference_runs = args.runs or (1 if args.quick else GOAL_RUNS)
    figures: dict[str, Any] = {}
    with tqdm(total=reference_runs + len(counts), file=sys.stderr, desc="compositing") as bar:
        references = []
        for _ in range(reference_runs):
            references.append(run_part("reference", 2, ref_size, repeats))
            add_ratios(references[-1])
            bar.update(1)
        figures["reference"] = references[0]
        figures["reference_runs"] = [run_summary(r) for r in references]
        algos: dict[str, Any] = {}
        for ranks in counts:
            bar.set_postfix_str(f"{ranks} ranks")
            algos[str(ranks)] = run_part("algorithms", ranks, 1024, repeats)
            bar.update(1)
    figures["algorithms_1024"] = algos
    figures["communication_ratio_forms"] = communication_ratio_forms(algos)
    figures["goals"] = goals(figures)
    stamp(figures, run, changed)
    figures["notes"] = {
        "oversubscribed": f"{os.cpu_count()} cores: runs above {os.cpu_count()} ranks share "
        "cores (MPICH told to yield while waiting)",
        "timing": "median of repeats after a warm-up; a collective's time is the slowest rank's",
    }
    figures["machine"] = {
        "cores": os.cpu_count(),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "quick": bool(args.quick),
    }
    if args.plots:
        with output_dir(args.plots, args.force) as folder:
            plot(figures, folder / "compositing_ranks.png")
    emit(figures, args.json, "Sort-last compositing over mpi4py")
    if args.save:
        save_result(variant_name("compositing", changed, "cpu"), figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
