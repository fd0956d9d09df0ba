"""1-D transfer functions: piecewise-linear colour and opacity over the normalized scalar range.

Opacities are defined for a reference step Δs₀ (voxel units); a render at step Δs uses
α' = 1 − (1 − α)^(Δs/Δs₀), so changing the step (a tuner knob) keeps the image's look.
Presets by name, JSON files, and a lookup table (``lut``) that the raycaster and the CPU
reference both interpolate linearly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from raytracer.volume.errors import VolumeError

LUT_SIZE = 1024


def correct_opacity(alpha: np.ndarray | float, step: float,
                    reference_step: float = 1.0) -> np.ndarray | float:
    """Opacity of one sample at ``step`` given opacity ``alpha`` at ``reference_step``."""
    alpha = np.clip(np.asarray(alpha, np.float64), 0.0, 1.0)
    return 1.0 - np.power(1.0 - alpha, step / reference_step)


def _points(raw, width: int, what: str, where: str) -> tuple[tuple[float, ...], ...]:
    """Validate control points: rows of ``width`` finite numbers in [0, 1], x non-decreasing."""
    try:
        pts = tuple(tuple(float(v) for v in row) for row in raw)
    except (TypeError, ValueError):
        raise VolumeError(f"{where}: {what} must be a list of [x, ...] rows of numbers, "
                          f"got {raw!r}") from None
    if not pts:
        raise VolumeError(f"{where}: {what} has no control points")
    for i, row in enumerate(pts):
        if len(row) != width:
            raise VolumeError(f"{where}: {what}[{i}] has {len(row)} numbers, needs {width}")
        if not all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in row):
            raise VolumeError(f"{where}: {what}[{i}] = {list(row)}: values must be in [0, 1]")
    xs = [row[0] for row in pts]
    if any(b < a for a, b in zip(xs, xs[1:], strict=False)):
        raise VolumeError(f"{where}: {what} x positions must be non-decreasing, got {xs}")
    return pts


@dataclass(frozen=True)
class TransferFunction:
    """Colour points (x, r, g, b) and opacity points (x, alpha) over the normalized range."""

    colors: tuple[tuple[float, float, float, float], ...]
    opacities: tuple[tuple[float, float], ...]
    reference_step: float = 1.0  # Δs₀ in voxel units: the step the opacities are defined for
    name: str = "custom"

    def __post_init__(self) -> None:
        where = f"transfer function {self.name!r}"
        object.__setattr__(self, "colors", _points(self.colors, 4, "colors", where))
        object.__setattr__(self, "opacities", _points(self.opacities, 2, "opacities", where))
        if not (math.isfinite(self.reference_step) and self.reference_step > 0):
            raise VolumeError(f"{where}: reference_step must be positive, "
                              f"got {self.reference_step}")
        if max(a for _, a in self.opacities) <= 0.0:
            raise VolumeError(f"{where}: no opacity anywhere (every opacity point is 0); "
                              f"the volume would be invisible")

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """RGBA (…, 4) float64 at normalized values ``x`` (clamped to [0, 1]), uncorrected."""
        x = np.clip(np.asarray(x, np.float64), 0.0, 1.0)
        c = np.asarray(self.colors)
        o = np.asarray(self.opacities)
        rgb = [np.interp(x, c[:, 0], c[:, k]) for k in (1, 2, 3)]
        return np.stack([*rgb, np.interp(x, o[:, 0], o[:, 1])], axis=-1)

    def lut(self, n: int = LUT_SIZE, step: float | None = None) -> np.ndarray:
        """(n, 4) float32 RGBA table at x = i / (n − 1); opacity corrected for ``step``
        (voxel units) when given. Renderers interpolate linearly between entries."""
        if n < 2:
            raise VolumeError(f"transfer function {self.name!r}: lut size must be >= 2, got {n}")
        table = self.evaluate(np.linspace(0.0, 1.0, n))
        if step is not None:
            if not (math.isfinite(step) and step > 0):
                raise VolumeError(f"sample step must be a positive number of voxels, got {step}")
            table[:, 3] = correct_opacity(table[:, 3], step, self.reference_step)
        return table.astype(np.float32)

    def to_dict(self) -> dict:
        """The JSON form that :func:`load_transfer_function` reads."""
        return {"name": self.name, "colors": [list(r) for r in self.colors],
                "opacities": [list(r) for r in self.opacities],
                "reference_step": self.reference_step}


def _tf(name: str, colors, opacities) -> TransferFunction:
    return TransferFunction(tuple(colors), tuple(opacities), 1.0, name)


PRESETS: dict[str, TransferFunction] = {
    "grey": _tf("grey", [(0, 0.1, 0.1, 0.1), (1, 1, 1, 1)],
                [(0, 0), (0.1, 0), (1, 0.4)]),
    "fire": _tf("fire", [(0, 0.2, 0, 0), (0.35, 0.9, 0.1, 0), (0.7, 1, 0.75, 0.1), (1, 1, 1, 0.9)],
                [(0, 0), (0.15, 0), (0.5, 0.08), (1, 0.5)]),
    "ct": _tf("ct", [(0, 0, 0, 0), (0.2, 0.75, 0.45, 0.35), (0.45, 0.95, 0.8, 0.7), (1, 1, 1, 1)],
              [(0, 0), (0.12, 0), (0.25, 0.02), (0.4, 0.02), (0.5, 0.3), (1, 0.8)]),
    "bone": _tf("bone", [(0, 0.8, 0.7, 0.6), (0.5, 0.95, 0.9, 0.8), (1, 1, 1, 1)],
                [(0, 0), (0.35, 0), (0.5, 0.4), (1, 0.9)]),
    "bonsai": _tf("bonsai", [(0, 0.3, 0.15, 0.05), (0.2, 0.25, 0.6, 0.15), (0.45, 0.55, 0.35, 0.15),
                             (1, 0.95, 0.85, 0.7)],
                  [(0, 0), (0.12, 0), (0.2, 0.06), (0.4, 0.15), (1, 0.6)]),
    "aneurism": _tf("aneurism", [(0, 0.6, 0.1, 0.05), (0.5, 0.95, 0.4, 0.3), (1, 1, 0.95, 0.9)],
                    [(0, 0), (0.15, 0), (0.3, 0.2), (1, 0.9)]),
    "tooth": _tf("tooth", [(0, 0.5, 0.4, 0.3), (0.6, 0.9, 0.75, 0.5), (1, 1, 1, 1)],
                 [(0, 0), (0.4, 0), (0.5, 0.02), (0.62, 0.25), (0.8, 0.2), (0.9, 0.8), (1, 0.9)]),
    "neghip": _tf("neghip", [(0, 0.1, 0.2, 1), (0.5, 0.2, 1, 0.3), (1, 1, 0.2, 0.1)],
                  [(0, 0), (0.1, 0), (0.3, 0.05), (1, 0.6)]),
    "ironprot": _tf("ironprot", [(0, 0.2, 0.3, 0.9), (0.5, 0.9, 0.8, 0.2), (1, 1, 0.3, 0.1)],
                    [(0, 0), (0.1, 0), (0.3, 0.05), (1, 0.6)]),
    "headsq": _tf("headsq", [(0, 0, 0, 0), (0.15, 0.8, 0.5, 0.4), (0.3, 0.95, 0.85, 0.75),
                             (1, 1, 1, 1)],
                  [(0, 0), (0.1, 0), (0.15, 0.03), (0.25, 0.03), (0.35, 0.4), (1, 0.9)]),
    "marschner-lobb": _tf("marschner-lobb", [(0, 0.1, 0.2, 0.9), (0.5, 0.9, 0.9, 0.9),
                                             (1, 0.9, 0.3, 0.1)],
                          [(0, 0), (0.45, 0), (0.5, 0.3), (0.55, 0), (1, 0)]),
    "field": _tf("field", [(0, 0.1, 0.3, 0.9), (0.4, 0.3, 0.9, 0.6), (1, 1, 0.9, 0.3)],
                 [(0, 0), (0.05, 0), (0.3, 0.05), (1, 0.4)]),
}


def preset(name: str) -> TransferFunction:
    """A preset by name; unknown names list the known ones."""
    key = name.lower().split(":")[0]
    if key not in PRESETS:
        raise VolumeError(f"unknown transfer function {name!r}; presets: {', '.join(PRESETS)}, "
                          f"or a .json file")
    return PRESETS[key]


def default_for(volume_name: str) -> TransferFunction:
    """The preset made for a shipped/procedural volume, else ``grey``."""
    return PRESETS.get(volume_name.lower().split(":")[0], PRESETS["grey"])


def load_transfer_function(path: str | Path) -> TransferFunction:
    """Read ``{"colors": [[x, r, g, b], ...], "opacities": [[x, a], ...],
    "reference_step": 1.0}``; errors name the file and the key."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise VolumeError(f"{path}: transfer function file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise VolumeError(f"{path}: not a JSON transfer function ({exc})") from None
    if not isinstance(data, dict):
        raise VolumeError(f"{path}: a transfer function must be a JSON object")
    for key in ("colors", "opacities"):
        if key not in data:
            raise VolumeError(f"{path}: missing key {key!r}")
    unknown = set(data) - {"name", "colors", "opacities", "reference_step"}
    if unknown:
        raise VolumeError(f"{path}: unknown key(s) {sorted(unknown)}")
    step = data.get("reference_step", 1.0)
    if not isinstance(step, int | float) or isinstance(step, bool):
        raise VolumeError(f"{path}: 'reference_step' must be a number, got {step!r}")
    try:
        return TransferFunction(data["colors"], data["opacities"], float(step),
                                str(data.get("name", path.stem)))
    except VolumeError as exc:
        raise VolumeError(f"{path}: {exc}") from None


def resolve_transfer_function(spec: str | Path | TransferFunction | None,
                      volume_name: str = "") -> TransferFunction:
    """Resolve a preset name, a JSON path or a TransferFunction; None -> the volume's default."""
    if isinstance(spec, TransferFunction):
        return spec
    if spec is None or spec == "":
        return default_for(volume_name)
    text = str(spec)
    if text.lower().endswith(".json") or Path(text).exists():
        return load_transfer_function(text)
    return preset(text)
