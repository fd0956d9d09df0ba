"""The ``autotune`` command: render, scenes, devices, calibrate, bench, view, demo, volume(s),
predict, mapping.

An application on top of the core: it wires the ray tracer to the tuner; nothing in the
core imports it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from autotune_app import mapping_command, predict_command, volume_command
from autotune_app import options as opt
from autotune_app.limits import check_device_memory
from autotune_app.report import emit
from autotune_app.scenes import load_scene, shipped_scenes
from autotune_app.viewer import add_view_parser, run_view
from common.atomic_files import OutputError, check_writable_file, save_png
from models.device_profile import ProfileError

BENCHMARK_MODULES = (
    "benchmarks.renderers.throughput",
    "benchmarks.renderers.volume_throughput",
    "benchmarks.renderers.compositing",
    "benchmarks.renderers.first_render",
    "benchmarks.tuner.controller_cost",
    "benchmarks.tuner.replay_record",
    "benchmarks.tuner.embed",
    "benchmarks.governed.tracer_tuned",
    "benchmarks.governed.tracer_model",
    "benchmarks.governed.probe_cost",
    "benchmarks.governed.volume_tuned",
    "benchmarks.governed.gpu",
    "benchmarks.studies.cluster_prediction",
    "benchmarks.studies.pipeline_mapping",
    "benchmarks.studies.kernel_models",
)
# `autotune bench NAME` runs the module NAME (dashes for underscores).
BENCHMARKS = {module.rsplit(".", 1)[1].replace("_", "-"): module for module in BENCHMARK_MODULES}
# `autotune report`: the performance pages from the benchmarks' results (run by name, as they)
REPORT_MODULE = "benchmarks.performance_pages"
# The names the benchmarks had before they were named after their modules, still accepted.
FORMER_BENCHMARK_NAMES = {
    "paper": "tracer-tuned",
    "model": "tracer-model",
    "probe": "probe-cost",
    "controller": "controller-cost",
    "replay": "replay-record",
    "volume": "volume-throughput",
    "cluster": "cluster-prediction",
    "mapping": "pipeline-mapping",
    "models": "kernel-models",
}


JSON_HELP = "print the figures as JSON instead of a table"


def _parser(sub: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=text, description=text, formatter_class=opt.HelpFormatter)


def _add_render(sub: argparse._SubParsersAction) -> None:
    p = _parser(sub, "render", "render one image and print per-phase kernel times")
    opt.add_scene(p)
    opt.add_camera(p)
    opt.add_size(p, 1280, 720)
    p.add_argument("--ao-rays", type=opt.ao_rays, default=8.0,
                   help=f"ambient-occlusion rays per pixel, 0..{opt.MAX_AO_RAYS} (a fraction "
                        f"adds one ray to that share of the pixels)")
    p.add_argument("--ao-radius", type=opt.ao_radius, default=0.1,
                   help="AO radius as a fraction of the scene diagonal, in (0, 1]")
    p.add_argument("--shadows", action=argparse.BooleanOptionalAction, default=True,
                   help="trace shadow rays to the point light")
    p.add_argument("--phong", action=argparse.BooleanOptionalAction, default=True,
                   help="Phong highlights (else diffuse only)")
    p.add_argument("--ao-filter", action=argparse.BooleanOptionalAction, default=True,
                   help="pool each pixel's AO rays with its neighbours' on the same surface "
                        "(else each pixel's own rays)")
    p.add_argument("--seed", type=opt.seed, default=0,
                   help=f"AO random seed, 0..{opt.MAX_SEED}")
    p.add_argument("--repeat", type=opt.positive_int, default=1,
                   help="render N times and report the last (the first includes warm-up)")
    opt.add_device(p)
    p.add_argument("--counters", action="store_true",
                   help="also count BVH nodes visited and leaves tested per pixel")
    p.add_argument("-o", "--output", type=Path, metavar="FILE.png",
                   help="write the image as PNG (the name must end in .png)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def check_png_output(path: Path) -> None:
    """Before any work: the image goes to a writable ``.png`` file name (PNG is the only format
    written; a name asking for another would get PNG bytes)."""
    if path.is_dir():
        raise OutputError(f"{path}: is a folder; give a file name ending in .png")
    if path.suffix.lower() != ".png":
        raise OutputError(f"{path}: images are written as PNG only; use a name ending in .png")
    check_writable_file(path)


def _cmd_render(args: argparse.Namespace) -> int:
    from raytracer.mesh.tracer import RenderSettings, Tracer  # lazy: loads pyopencl and numba

    if args.output:
        check_png_output(args.output)
    settings = RenderSettings(args.ao_rays, args.ao_radius, args.shadows, args.phong,
                              ao_filter=args.ao_filter)
    settings.validate()
    scene = load_scene(args.scene, up=args.up)
    opt.apply_camera(scene, args)
    tracer = Tracer(scene, device=args.device, counters=args.counters)
    check_device_memory(tracer, args.width, args.height)
    for _ in range(args.repeat):
        frame = tracer.render(scene.camera, args.width, args.height, settings, seed=args.seed)
    if args.output:
        save_png(frame.image, args.output)
    figures = {
        "scene": scene.name, "triangles": scene.triangle_count, "device": tracer.device.name,
        "width": args.width, "height": args.height,
        "settings": {"ao_rays": settings.ao_rays, "ao_radius": settings.ao_radius,
                     "shadows": settings.shadows, "phong": settings.phong},
        "phase_ms": {p: s * 1e3 for p, s in frame.phase_seconds.items()},
        "total_ms": frame.seconds * 1e3,
        "load_ms": scene.load_info["load_seconds"] * 1e3,
        **({"mesh_cache": scene.load_info["mesh_cache"]} if "mesh_cache" in scene.load_info
           else {}),
        "bvh": {"build_ms": tracer.bvh.stats.build_seconds * 1e3,
                "inner_nodes": tracer.bvh.stats.inner_nodes, "depth": tracer.bvh.stats.depth,
                "sah_cost": tracer.bvh.stats.sah_cost},
    }
    for phase, c in frame.counters.items():
        figures.setdefault("counters", {})[phase] = {
            "nodes_per_pixel": float(c[..., 0].mean()), "tests_per_pixel": float(c[..., 1].mean())}
    if args.output:
        figures["output"] = str(args.output)
    emit(figures, args.json, title=f"autotune render: {scene.name} on {tracer.device.name}")
    return 0


def _cmd_scenes(args: argparse.Namespace) -> int:
    rows = shipped_scenes()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"  {'scene':<14}{'triangles':>10}  about")
    for r in rows:
        mark = "*" if r["default"] else " "
        print(f"{mark} {r['name']:<14}{r['triangles']:>10,}  {r['about']}")
    print("(* = default; any .obj/.ply file works too: --scene path/to/mesh.ply)")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from raytracer.device.choice import (  # lazy: loads pyopencl
        DeviceError,
        choose_device,
        list_devices,
    )

    devices = list_devices()
    try:
        chosen = choose_device()[0]
    except DeviceError:
        chosen = None  # listed all the same: the lines say why none builds
    if args.json:
        print(json.dumps([d.__dict__ | {"default": d == chosen} for d in devices], indent=2))
        return 0
    for d in devices:
        print(f"{'*' if d == chosen else ' '} {d.describe()}")
    print("(* = default: the first GPU that builds, else the preferred CPU runtime that builds; "
          "override with --device P:D|gpu|cpu|intel-cpu|pocl or $AUTOTUNE_DEVICE)")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from governed.mesh.calibration_fit import calibrate  # lazy: loads pyopencl and numba
    from governed.mesh.profile_store import shipped_path  # lazy: with the calibration
    from raytracer.device.choice import choose_device  # lazy: loads pyopencl

    info, _ = choose_device(args.device)
    out = args.output
    if args.ship:
        if args.output is not None:
            raise ValueError("give --ship or -o FILE, not both")
        out = shipped_path(info.name, info.driver)
        out.parent.mkdir(parents=True, exist_ok=True)
    profile = calibrate(info, quick=args.quick, save=True, progress=True, out=out)
    emit(profile.to_dict(), args.json, title=f"calibrated profile for {info.name}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    name = FORMER_BENCHMARK_NAMES.get(args.name, args.name)
    module = importlib.import_module(BENCHMARKS[name])
    return int(module.main(args.rest) or 0)


def _cmd_report(args: argparse.Namespace) -> int:
    argv = [*(["--check"] if args.check else []),
            *(["--results", str(args.results)] if args.results else []),
            *(["--out", str(args.out)] if args.out else [])]
    return int(importlib.import_module(REPORT_MODULE).main(argv) or 0)


def _cmd_demo(args: argparse.Namespace) -> int:
    from autotune_app.demo import run_demo  # lazy: loads pyopencl and numba

    return run_demo(args)


DESCRIPTION = ("autotune-rt: a ray tracer that holds a frame-time target by predicting every "
               "frame before it is rendered")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autotune", description=DESCRIPTION,
                                     formatter_class=opt.HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="autotune COMMAND --help shows its options")
    _add_render(sub)
    p = _parser(sub, "scenes", "list the shipped scenes with their triangle counts")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p = _parser(sub, "devices", "list OpenCL platforms and devices")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p = _parser(sub, "calibrate", "measure a device profile for the Hong-Kim model")
    opt.add_device(p)
    p.add_argument("--quick", action="store_true", help="fewer views and sizes (under a minute)")
    p.add_argument("-o", "--output", type=Path, help="also write the profile JSON here")
    p.add_argument("--ship", action="store_true",
                   help="also write the profile and calibration as this machine's shipped ones "
                        "(models/data/machines/<machine>/): after a kernel change, refit them")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p = _parser(sub, "bench", "headless benchmarks (figures as a table or --json)")
    p.add_argument("name", choices=sorted(BENCHMARKS) + sorted(FORMER_BENCHMARK_NAMES),
                   metavar="NAME", help=f"which benchmark: {', '.join(sorted(BENCHMARKS))} "
                   f"(autotune bench NAME --help lists its options; the former names "
                   f"{', '.join(sorted(FORMER_BENCHMARK_NAMES))} still work)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the benchmark's own options")
    p = _parser(sub, "report", "regenerate docs/performance.md from the committed results/")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if the page differs from the results")
    p.add_argument("--results", type=Path, help="the results folder (default: results/)")
    p.add_argument("--out", type=Path, help="the page (default: docs/performance.md)")
    p = _parser(sub, "demo", "the tuned animation, headless: frames, plots, report")
    opt.add_scene(p)
    opt.add_camera(p)
    p.add_argument("-o", "--out", type=Path, default=Path("demo_out"), metavar="DIR",
                   help="folder to write; must be new or empty unless --force")
    p.add_argument("--force", action="store_true",
                   help="write into an existing non-empty --out folder: same-named files are "
                        "replaced, nothing else is deleted")
    p.add_argument("--frames", type=opt.positive_int, default=100, help="frames to render")
    opt.add_size(p, 640, 360)
    opt.add_target(p, None, "the scene's time at 8 AO rays + shadows on the first frame")
    opt.add_controller(p)
    opt.add_probe_policy(p)
    opt.add_device(p)
    p.add_argument("--volume", default="bonsai",
                   help="volume for the governed distributed part (autotune volumes lists them)")
    p.add_argument("--volume-ranks", type=opt.non_negative_int, default=4,
                   help="MPI ranks of the volume part (launched with mpiexec; 0 skips it)")
    p.add_argument("--volume-frames", type=opt.positive_int, default=24,
                   help="frames of the volume part (the double orbit of the cluster study, "
                        "Tkachev et al.)")
    p.add_argument("--volume-size", type=opt.image_side, default=512,
                   help="width and height of the volume part's images")
    p.add_argument("--volume-target-ms", type=opt.finite_positive, default=None,
                   help="frame-time target of the volume part (default: half the first view's "
                        "full-quality frame, measured after calibration)")
    volume_command.add_parsers(sub)
    predict_command.add_parser(sub)
    mapping_command.add_parser(sub)
    add_view_parser(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line, without the Python source line that raised it."""
    print(f"autotune: warning: {message}", file=sys.stderr if file is None else file)


def _interrupted(exc: BaseException) -> bool:
    """Ctrl-C, also when numba's parallel region turned it into a SystemError."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt) or "KeyboardInterrupt" in str(exc):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


#: The packages whose progress notices (logged at INFO: a first-run compile, ...) the command
#: line shows; a program that embeds them sees them only where it configures logging
NOTICE_LOGGERS = ("autotune", "governed", "raytracer", "common")


def show_notices() -> None:
    """Print the project's INFO notices on stderr as ``autotune: ...`` lines (once)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("autotune: %(message)s"))
    for name in NOTICE_LOGGERS:
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``autotune`` console script."""
    args = build_parser().parse_args(argv)
    show_notices()
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = _show_warning
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    handlers = {"render": _cmd_render, "scenes": _cmd_scenes, "devices": _cmd_devices,
                "calibrate": _cmd_calibrate, "bench": _cmd_bench, "report": _cmd_report,
                "demo": _cmd_demo,
                "predict": predict_command.cmd_predict, "mapping": mapping_command.cmd_mapping,
                "view": run_view}
    if args.command in ("volume", "volumes"):
        from autotune_app.volume_run import cmd_volume, cmd_volumes  # lazy: loads numba

        handlers.update(volume=cmd_volume, volumes=cmd_volumes)
    from raytracer.device.choice import DeviceError  # lazy: loads pyopencl
    from raytracer.mesh.tracer import TracerError  # lazy: loads pyopencl and numba

    try:
        return handlers[args.command](args)
    except (ValueError, DeviceError, TracerError, ProfileError, OSError) as exc:
        print(f"autotune {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"autotune {args.command}: interrupted", file=sys.stderr)
        return 130
    except SystemError as exc:  # numba wraps a Ctrl-C in a parallel region in SystemError
        if not _interrupted(exc):
            raise
        print(f"autotune {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
