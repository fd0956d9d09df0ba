"""``autotune predict``: the cluster study's procurement question from the command line.

The study: Tkachev, Frey, Müller, Bruder, Ertl, "Prediction of Distributed Volume Visualization
Performance to Support Render Hardware Acquisition" (issue 14).

``autotune predict --histogram H.json --ranks 64 --image 2048x2048`` prints the predicted mean
frame time of the distributed volume renderer on a cluster of that many ranks whose nodes
render with the local render times of the performance histogram (recorded by
``autotune bench cluster-prediction`` or from ``autotune volume``'s timings). ``--bandwidth`` and
``--latency`` swap in another network's compositing term (the model learnt the rest).
Outside the rank counts and image sizes the model was trained on, the network extrapolates:
the command says so and also prints the analytic estimate (E[max] of the histogram over the
ranks + the compositing term), which rests on stated assumptions instead of a fit. Above the
cores of the machine whose emulation runs trained it (the model's ``cores``), those runs had
ranks sharing cores, and the command says that too.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from autotune_app import options as opt
from autotune_app.report import emit
from studies.cluster_prediction.model import ClusterModelError, features


def image_size(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    try:
        w, h = (opt.image_side(p) for p in parts) if len(parts) == 2 else (0, 0)
    except argparse.ArgumentTypeError:
        w = h = 0
    if not (w and h):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, e.g. 2048x2048; got {text!r}")
    return w, h


def add_parser(sub: argparse._SubParsersAction) -> None:
    text = ("predict the mean frame time of the distributed volume renderer on a bigger or "
            "faster cluster, from a performance histogram (cluster prediction, Tkachev et al.)")
    p = sub.add_parser("predict", help=text, description=text,
                       formatter_class=opt.HelpFormatter)
    p.add_argument("--histogram", type=Path, required=True, metavar="H.json",
                   help="performance histogram of the nodes' local render times")
    p.add_argument("--ranks", type=opt.positive_int, required=True, help="ranks (nodes)")
    p.add_argument("--image", type=image_size, required=True, metavar="WxH", help="image size")
    p.add_argument("--model", type=Path, metavar="M.json",
                   help="trained cluster model (default: the one shipped, trained here)")
    p.add_argument("--bandwidth", type=opt.finite_positive, metavar="GBps",
                   help="per-link bandwidth of the target network in GB/s (default: the "
                        "model's calibrated term)")
    p.add_argument("--latency", type=float, metavar="us",
                   help="per-message latency of the target network in µs")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def cmd_predict(args: argparse.Namespace) -> int:
    from studies.cluster_prediction.files import (  # lazy: loads numba
        DEFAULT_MODEL,
        read_histogram,
        read_model,
    )

    if args.latency is not None and not (math.isfinite(args.latency) and args.latency >= 0):
        raise ValueError(f"--latency must be a finite number >= 0 (µs), got {args.latency}")
    hist = read_histogram(args.histogram)
    model = read_model(args.model)
    where = str(args.model or DEFAULT_MODEL)
    term = model.term
    if args.bandwidth is not None or args.latency is not None:
        if term is None:
            raise ClusterModelError(f"{where}: this model has no compositing term, so "
                                    "--bandwidth/--latency cannot change its network")
        term = dataclasses.replace(
            term, bandwidth=term.bandwidth if args.bandwidth is None else args.bandwidth * 1e9,
            latency=term.latency if args.latency is None else args.latency * 1e-6)
    w, h = args.image
    px = w * h
    spread = bool(model.meta.get("spread_features"))
    hf = hist.overall.features()
    if spread:
        hf = np.concatenate([hf, hist.frame_spread()])
    x = features(px, args.ranks, hf)
    if x.shape[1] != model.x_mean.size:
        raise ClusterModelError(f"{where}: expects {model.x_mean.size} features, the "
                                f"histogram gives {x.shape[1]}")
    seconds = float(model.predict(x, px, args.ranks, term=term)[0])
    comp = float(term.seconds(px, args.ranks)) if term is not None else None
    analytic = hist.overall.expected_max(args.ranks) + (comp or 0.0)
    ranks_range = model.meta.get("ranks")
    sizes = model.meta.get("image_pixels")
    notes = []
    if ranks_range and not ranks_range[0] <= args.ranks <= ranks_range[1]:
        notes.append(f"{args.ranks} ranks is outside the {ranks_range[0]}..{ranks_range[1]} "
                     "the model was trained on: the network extrapolates; the analytic "
                     "estimate is the safer figure there")
    cores = model.meta.get("cores")
    if cores and args.ranks > cores:
        notes.append(f"the network learned from emulation runs on a {cores}-core machine, "
                     f"where more than {cores} ranks shared cores: above {cores} ranks it "
                     "prices that sharing, which a cluster with a core per rank does not have; "
                     "the analytic estimate assumes a core per rank")
    if sizes and not sizes[0] <= px <= sizes[1]:
        notes.append(f"{w}x{h} is outside the image sizes the model was trained on "
                     f"({int(math.sqrt(sizes[0]))}² .. {int(math.sqrt(sizes[1]))}²)")
    if hist.ranks != args.ranks:
        notes.append(f"the histogram was recorded on {hist.ranks} rank(s); it is used as the "
                     f"local render time distribution of each of the {args.ranks} ranks as is")
    out: dict[str, Any] = {
        "predicted_frame_ms": 1e3 * seconds, "predicted_fps": 1.0 / seconds if seconds > 0
        else None, "ranks": args.ranks, "image": f"{w}x{h}",
        "compositing_term_ms": None if comp is None else 1e3 * comp,
        "analytic_frame_ms": 1e3 * analytic,
        "histogram": {"file": str(args.histogram), "mean_ms": 1e3 * hist.overall.mean,
                      "min_ms": 1e3 * hist.overall.minimum, "max_ms": 1e3 * hist.overall.maximum,
                      "ranks": hist.ranks},
        "network": None if term is None else {"latency_us": term.latency * 1e6,
                                              "bandwidth_GBps": term.bandwidth / 1e9,
                                              "blend_Mpx_per_s": term.blend_rate / 1e6},
        "model": where, "notes": notes}
    if args.json:
        emit(out, True)
        return 0
    print(f"predicted mean frame time: {out['predicted_frame_ms']:.1f} ms "
          f"({out['predicted_fps']:.2f} fps) on {args.ranks} ranks at {w}x{h}")
    if comp is not None:
        n = out["network"]
        print(f"  compositing term: {1e3 * comp:.1f} ms (latency {n['latency_us']:.3g} µs, "
              f"{n['bandwidth_GBps']:.3g} GB/s, blend {n['blend_Mpx_per_s']:.0f} Mpx/s)")
    print(f"  analytic (E[max] of the histogram over {args.ranks} ranks + term): "
          f"{out['analytic_frame_ms']:.1f} ms")
    for note in notes:
        print(f"  note: {note}")
    return 0
