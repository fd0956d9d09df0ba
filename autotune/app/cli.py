"""The ``autotune`` command: render, devices, calibrate, bench, view, demo.

An application on top of the core: it wires the ray tracer to the tuner; nothing in the
core imports it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

BENCHMARKS = {
    "throughput": "benchmarks.throughput",
    "model": "benchmarks.model_accuracy",
    "paper": "benchmarks.paper",
    "probe": "benchmarks.probe_cost",
    "controller": "benchmarks.controller_cost",
}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _add_render(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("render", help="render one image and print per-phase kernel times")
    p.add_argument("--scene", default="dragon", help="scene name or .obj/.ply path")
    p.add_argument("--width", type=_positive_int, default=1280)
    p.add_argument("--height", type=_positive_int, default=720)
    p.add_argument("--ao-rays", type=float, default=8,
                   help="ambient-occlusion rays per pixel (0-64; a fraction adds one ray to "
                        "that share of the pixels)")
    p.add_argument("--ao-radius", type=float, default=0.1,
                   help="AO radius as a fraction of the scene diagonal")
    p.add_argument("--shadows", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--phong", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--seed", type=int, default=0, help="AO random seed")
    p.add_argument("--repeat", type=_positive_int, default=1,
                   help="render N times and report the last (the first includes warm-up)")
    p.add_argument("--device", help="OpenCL device: gpu, cpu, P:D or a name part "
                                    "(default: $AUTOTUNE_DEVICE, else first GPU, else CPU)")
    p.add_argument("--counters", action="store_true",
                   help="also count BVH nodes visited and triangles tested per pixel")
    p.add_argument("-o", "--output", type=Path, help="PNG file to write")
    p.add_argument("--json", action="store_true", help="print figures as JSON")


def _cmd_render(args: argparse.Namespace) -> int:
    from autotune.atomic_files import save_png
    from raytracer.scene import load_scene
    from raytracer.tracer import RenderSettings, Tracer

    settings = RenderSettings(args.ao_rays, args.ao_radius, args.shadows, args.phong)
    settings.validate()
    scene = load_scene(args.scene)
    tracer = Tracer(scene, device=args.device, counters=args.counters)
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
        "bvh": {"build_ms": tracer.bvh.stats.build_seconds * 1e3,
                "inner_nodes": tracer.bvh.stats.inner_nodes, "depth": tracer.bvh.stats.depth,
                "sah_cost": tracer.bvh.stats.sah_cost},
    }
    for phase, c in frame.counters.items():
        figures.setdefault("counters", {})[phase] = {
            "nodes_per_pixel": float(c[..., 0].mean()), "tests_per_pixel": float(c[..., 1].mean())}
    if args.output:
        figures["output"] = str(args.output)
    from autotune.app.report import emit

    emit(figures, args.json, title=f"autotune render: {scene.name} on {tracer.device.name}")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from raytracer.opencl_device import choose_device, list_devices

    devices = list_devices()
    chosen = choose_device()[0]
    if args.json:
        print(json.dumps([d.__dict__ | {"default": d == chosen} for d in devices], indent=2))
        return 0
    for d in devices:
        mark = "*" if d == chosen else " "
        print(f"{mark} {d.platform_index}:{d.device_index}  {d.kind:<4} {d.name}  "
              f"[{d.platform}, {d.compute_units} CUs, {d.clock_mhz} MHz, "
              f"{d.global_mem_mb} MiB, driver {d.driver}]")
    print("(* = default; override with --device or $AUTOTUNE_DEVICE)")
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from autotune.app.report import emit
    from raytracer.opencl_device import choose_device
    from raytracer.tuning.calibration_fit import calibrate

    info, _ = choose_device(args.device)
    profile = calibrate(info, quick=args.quick, save=True, progress=True,
                        out=args.output)
    emit(profile.to_dict(), args.json, title=f"calibrated profile for {info.name}")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    module = importlib.import_module(BENCHMARKS[args.name])
    return int(module.main(args.rest) or 0)


def _cmd_demo(args: argparse.Namespace) -> int:
    from autotune.app.demo import run_demo

    return run_demo(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="autotune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _add_render(sub)
    p = sub.add_parser("devices", help="list OpenCL platforms and devices")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("calibrate", help="measure a device profile for the Hong–Kim model")
    p.add_argument("--device")
    p.add_argument("--quick", action="store_true", help="fewer views and sizes (under a minute)")
    p.add_argument("-o", "--output", type=Path, help="also write the profile JSON here")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("bench", help="headless benchmarks (figures as a table or --json)")
    p.add_argument("name", choices=sorted(BENCHMARKS))
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the benchmark's own options")
    p = sub.add_parser("demo", help="the tuned animation, headless: frames, plots, report")
    p.add_argument("--scene", default="dragon")
    p.add_argument("--out", type=Path, default=Path("demo_out"))
    p.add_argument("--frames", type=_positive_int, default=100)
    p.add_argument("--width", type=_positive_int, default=640)
    p.add_argument("--height", type=_positive_int, default=360)
    p.add_argument("--target-ms", type=float, default=None,
                   help="target frame time (default: chosen from the first frame)")
    p.add_argument("--device")
    try:
        from autotune.app.viewer import add_view_parser
    except ImportError:  # the viewer's GL dependencies are missing
        pass
    else:
        add_view_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``autotune`` console script."""
    args = build_parser().parse_args(argv)
    handlers = {"render": _cmd_render, "devices": _cmd_devices, "calibrate": _cmd_calibrate,
                "bench": _cmd_bench, "demo": _cmd_demo}
    if args.command == "view":
        from autotune.app.viewer import run_view

        handlers["view"] = run_view
    from models.device_profile import ProfileError
    from raytracer.opencl_device import DeviceError
    from raytracer.tracer import TracerError

    warnings.simplefilter("default")
    try:
        return handlers[args.command](args)
    except (ValueError, DeviceError, TracerError, ProfileError, OSError) as exc:
        print(f"autotune {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"autotune {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
