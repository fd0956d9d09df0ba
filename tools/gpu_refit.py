"""Re-fit the ray tracer's model on a GPU check's recorded frames, without a GPU.

``autotune bench gpu`` keeps what it measured beside its results: the calibration frames
(``calibration_frames.json``) and the held-out frames (``heldout_frames.json``), each with its
probe workload, knobs and kernel seconds per phase, the device profile its microbenchmarks
measured (``calibrated_profile.json``), the driver's instruction counts
(``driver_kernel_counts.json``) and clang's of the kernels it ran (``kernel_counts.json``; a
check without them is read with the counts shipped now). This fits the model on the
calibration frames as ``autotune calibrate`` does and gives its error on the held-out frames,
for each variant: clang's counts (the product's) or the driver's, with the occupancy the kernels'
registers allow or the profile's one figure. A model change is then measured on the GPU's own
frames on any machine.

    python tools/gpu_refit.py results/nvidia-h200/gpu [--json]
    python tools/gpu_refit.py results/nvidia-h200/gpu-full-calibration \
        --heldout results/nvidia-h200/gpu
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.governed.tracer_model import errors
from governed.mesh.calibration_fit import fit_profile
from governed.mesh.calibration_frames import Sample
from governed.mesh.instruction_counts import load_kernel_counts
from governed.mesh.tuned_renderer import RayTraceModel
from models.device_profile import DeviceProfile, load_profile


def load_frames(path: Path) -> list[Sample]:
    """The frames a GPU check recorded in ``path``."""
    return [Sample.from_dict(d) for d in json.loads(path.read_text())]


@dataclass(frozen=True)
class Recorded:
    """What a GPU check recorded: its microbenchmark profile, frames and occupancy."""

    base: DeviceProfile
    calibration: list[Sample]
    heldout: list[Sample]
    occupancy: dict[str, int] | None

    @classmethod
    def read(cls, folder: Path, heldout: Path | None = None) -> Recorded:
        """``folder``'s recording; its held-out frames, or those of the check in ``heldout``
        (a run that calibrated but had no time left to measure them)."""
        steps = json.loads((folder / "results.json").read_text())["steps"]
        return cls(load_profile(folder / "calibrated_profile.json"),
                   load_frames(folder / "calibration_frames.json"),
                   load_frames((heldout or folder) / "heldout_frames.json"),
                   steps.get("calibration", {}).get("occupancy"))


def recorded_counts(folder: Path, heldout: Path | None, name: str) -> Path | None:
    """The counts file ``name`` a check kept (``folder``'s, else ``heldout``'s check's), or
    None: ``kernel_counts.json`` holds clang's counts of the kernels it ran (the shipped ones
    may since have changed), ``driver_kernel_counts.json`` the driver's."""
    return next((f / name for f in (folder, heldout)
                 if f is not None and (f / name).is_file()), None)


def fit_variant(recorded: Recorded, counts_path: Path | None,
                occupancy: dict[str, int] | None) -> dict:
    """Fit on the calibration frames with these counts (None: the shipped, clang's) and this
    occupancy (None: the profile's one figure); the errors in and out of sample."""
    kernel_counts = load_kernel_counts(counts_path)
    fitted = fit_profile(recorded.base, kernel_counts, recorded.calibration, occupancy=occupancy)
    model = RayTraceModel(fitted.profile, kernel_counts, fitted.calibration)
    held = errors(model, recorded.heldout)
    return {"in_sample_frame_mean": fitted.calibration.fit["mean_error"],
            "heldout_frame_mean": held["frame"]["mean"],
            "heldout_frame_p95": held["frame"]["p95"],
            "heldout_phase_mean": {p: e["mean"] for p, e in held["phases"].items()},
            "scale": dict(fitted.calibration.scale)}


def refit(folder: Path, heldout: Path | None = None) -> dict:
    """Held-out error of the model fitted on the calibration frames, per variant (the driver's
    counts from ``folder``, else from ``heldout``'s check)."""
    recorded = Recorded.read(folder, heldout)
    driver = recorded_counts(folder, heldout, "driver_kernel_counts.json")
    counts = {"clang": recorded_counts(folder, heldout, "kernel_counts.json"),
              **({"driver": driver} if driver is not None else {})}
    occupancies = {"profile_figure": None,
                   **({"occupancy": recorded.occupancy} if recorded.occupancy else {})}
    variants = {f"{c}_counts+{o}": fit_variant(recorded, path, occ)
                for c, path in counts.items() for o, occ in occupancies.items()}
    return {"folder": str(folder), "heldout_from": str(heldout or folder),
            "calibration_frames": len(recorded.calibration),
            "heldout_frames": len(recorded.heldout), "variants": variants}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a GPU check's results folder")
    parser.add_argument("--heldout", type=Path, metavar="FOLDER",
                        help="take the held-out frames from this check's folder instead")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    result = refit(args.folder, args.heldout)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    for name, v in result["variants"].items():
        print(f"{name:<32} in-sample {v['in_sample_frame_mean']:6.1%}  held-out "
              f"{v['heldout_frame_mean']:6.1%} (p95 {v['heldout_frame_p95']:6.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
