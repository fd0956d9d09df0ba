"""What one application fitted on top of a device profile, keyed by device and renderer.

An analytical model leaves out what a device does for one application; calibration measures
frames and fits, per component of the frame (the ray tracer's phases), ``measured = scale *
model + offset * items + miss * missed_items + launch`` (items = pixels; missed items = pixels
whose primary ray hit nothing, which take a short path the model's counts do not price; launch
= a constant per kernel launch). ``miss`` and ``launch`` are optional (zero when absent). The
fit may also record which parameters it fitted, their standard errors (``uncertainty``) and
which it held at their measured values because the data cannot tell them apart (``held``).

That fit belongs to the application, not to the device: it is stored apart from the
:class:`~models.device_profile.DeviceProfile` (one file per device and renderer), so
calibrating one renderer never overwrites another's, and the profile keeps the hardware's
measured figures only. Where the fit also moves a device parameter (the ray tracer's issue
cycles on a CPU), the fitted figure is stored here (``device_figures``) and replaces the
profile's for this application's model (:meth:`AppCalibration.model_profile`). It records the
fingerprint of the hardware profile it was fitted on. Where the fit's model ran with each
component's own occupancy (work-groups resident per core, from the compiled kernels' register
and shared-memory use on an NVIDIA GPU), that is stored too (``occupancy``) and the model
predicts with it; without it every component uses the profile's ``max_blocks_per_core``.

Profiles written before the split carried the ray tracer's fit as ``"fitted": {"scale_<phase>",
"offset_<phase>", "fit_mean_error", "fit_frames"}``; :func:`load_profile_and_calibration` still
reads them (split on read, silently).
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common.json_file import read_json
from models.device_profile import MACHINES_DIR, DeviceProfile, ProfileError, plausible_range

SCHEMA_VERSION = 1
LEGACY_RENDERER = "raytracer"  # whose fit old profiles held under "fitted"

# A scale is a factor on the analytical model: 0 prices everything at nothing (the tuner then
# picks the most expensive setting every frame), a negative one predicts negative times, and
# beyond 1000x the model describes nothing. An offset is seconds per item (pixel): 10 µs a
# pixel is 9 s a phase at 1280x720 (fits at tiny sizes fold launch overheads into it).
SCALE_MAX = 1e3
OFFSET_MAX = 1e-5
LAUNCH_MAX = 1.0  # seconds per kernel launch
_FIT_KEYS = {"mean_error": (0.0, 1e3), "frames": (1.0, 1e9)}
# a confounded pair of fitted parameters: "correlation a~b" and "product_relative_sd a*b"
_FIT_PAIR_KEYS = {"correlation": (-1.0, 1.0), "product_relative_sd": (0.0, math.inf)}


class CalibrationError(ProfileError):
    """An application calibration is missing, unreadable or invalid; names the file and key."""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_table(table: Any, name: str, low: float, high: float, low_open: bool,
                 where: str) -> None:
    if not isinstance(table, dict):
        raise CalibrationError(f"{where}: {name!r} must be an object of component -> number, "
                               f"got {table!r}")
    if not table:
        raise CalibrationError(f"{where}: {name!r} is empty (nothing was fitted)")
    for component, value in table.items():
        key = f"{name}.{component}"
        if not isinstance(component, str) or not component:
            raise CalibrationError(f"{where}: {name!r} has a bad component name {component!r}")
        if not _number(value) or not math.isfinite(value):
            raise CalibrationError(f"{where}: {key!r} must be a finite number, got {value!r}")
        bad_low = value <= low if low_open else value < low
        if bad_low or not value < high:
            interval = f"{'(' if low_open else '['}{low:g}, {high:g})"
            raise CalibrationError(f"{where}: {key!r} = {value:g} is outside {interval}")


@dataclass(frozen=True)
class AppCalibration:
    """Per-component ``scale * model + offset * items`` of one renderer on one device."""

    renderer: str  # "raytracer"
    device: str  # DeviceProfile.name
    driver: str  # DeviceProfile.driver
    scale: dict[str, float] = field(hash=False)  # component -> factor on the model, (0, 1e3)
    offset: dict[str, float] = field(hash=False)  # component -> seconds per item, [0, 1e-5)
    # mean_error, frames; for a confounded pair "correlation a~b", "product_relative_sd a*b"
    fit: dict[str, float] = field(default_factory=dict, hash=False)
    source: str = ""  # how it was measured
    device_profile: str = ""  # DeviceProfile.fingerprint() it was fitted with ("" = unknown)
    miss: dict[str, float] = field(default_factory=dict, hash=False)  # s per missed item
    launch: dict[str, float] = field(default_factory=dict, hash=False)  # s per launch
    # fitted parameter -> standard error (relative for scales and device parameters, fitted in
    # log space; seconds for offset / miss / launch), e.g. "scale.ao", "device.issue_cycles"
    uncertainty: dict[str, float] = field(default_factory=dict, hash=False)
    held: tuple[str, ...] = ()  # parameters the data could not identify, held where measured
    # fingerprint of the kernels' instruction counts it was fitted with ("" = not recorded): a
    # fit's scales absorb the counts, so after a kernel change it prices another program
    kernels: str = ""
    # device parameter -> the figure this fit moved it to (the profile keeps the measured one)
    device_figures: dict[str, float] = field(default_factory=dict, hash=False)
    # component -> work-groups resident per core its model ran with (absent: the profile's
    # max_blocks_per_core), e.g. from the kernel's registers on an NVIDIA GPU
    occupancy: dict[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        where = f"{self.renderer or '?'} calibration of {self.device!r}"
        _validate(self.to_dict(), where)
        object.__setattr__(self, "scale", {k: float(v) for k, v in self.scale.items()})
        object.__setattr__(self, "offset", {k: float(v) for k, v in self.offset.items()})
        object.__setattr__(self, "fit", {k: float(v) for k, v in self.fit.items()})
        for name in ("miss", "launch", "uncertainty", "device_figures"):
            object.__setattr__(self, name, {k: float(v) for k, v in getattr(self, name).items()})
        object.__setattr__(self, "occupancy", {k: int(v) for k, v in self.occupancy.items()})
        object.__setattr__(self, "held", tuple(self.held))

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(self.scale)

    def require(self, components: tuple[str, ...] | list[str], where: str = "") -> None:
        """Raise CalibrationError unless every one of ``components`` was fitted."""
        missing = [c for c in components if c not in self.scale]
        if missing:
            raise CalibrationError(f"{where or self.describe()}: no fit for "
                                   f"{', '.join(missing)} (has {', '.join(self.scale)})")

    def describe(self) -> str:
        return f"{self.renderer} calibration of {self.device!r} (driver {self.driver!r})"

    def apply(self, component: str, model_seconds: Any, items: float,
              missed_items: float = 0.0) -> Any:
        """``scale * model_seconds + offset * items + miss * missed_items + launch`` (arrays
        broadcast)."""
        if component not in self.scale:
            self.require((component,))
        out = model_seconds * self.scale[component] + self.offset[component] * items
        return out + self.miss.get(component, 0.0) * missed_items + self.launch.get(component,
                                                                                    0.0)

    def model_profile(self, profile: DeviceProfile) -> DeviceProfile:
        """``profile`` (the hardware's measured figures) with the figures this fit moved: what
        the analytical model of this application runs on."""
        if all(getattr(profile, k) == v for k, v in self.device_figures.items()):
            return profile  # nothing moved, or already applied
        return replace(profile, **self.device_figures)

    def matches(self, profile: DeviceProfile) -> bool:
        """Whether this was fitted for that device (and, when recorded, that very profile)."""
        same_device = (self.device, self.driver) == (profile.name, profile.driver)
        return same_device and self.device_profile in ("", profile.fingerprint())

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, "renderer": self.renderer,
                "device": self.device, "driver": self.driver, "scale": dict(self.scale),
                "offset": dict(self.offset), "fit": dict(self.fit), "source": self.source,
                "device_profile": self.device_profile,
                **({"miss": dict(self.miss)} if self.miss else {}),
                **({"launch": dict(self.launch)} if self.launch else {}),
                **({"uncertainty": dict(self.uncertainty)} if self.uncertainty else {}),
                **({"held": list(self.held)} if self.held else {}),
                **({"kernels": self.kernels} if self.kernels else {}),
                **({"device_figures": dict(self.device_figures)} if self.device_figures
                   else {}),
                **({"occupancy": dict(self.occupancy)} if self.occupancy else {})}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: Any, where: str = "<calibration dict>") -> AppCalibration:
        """Build from parsed JSON, validating every key; errors name ``where`` and the key."""
        _validate(d, where)
        values = {k: d[k] for k in ("renderer", "device", "driver", "scale", "offset")}
        values.update({k: d[k] for k in _OPTIONAL if k in d})
        return cls(**values)


_REQUIRED = ("schema_version", "renderer", "device", "driver", "scale", "offset")
_OPTIONAL = ("fit", "source", "device_profile", "miss", "launch", "uncertainty", "held",
             "kernels", "device_figures", "occupancy")
OCCUPANCY_MAX = 1024  # work-groups resident per core: no device holds more


def _validate(d: Any, where: str) -> None:
    if not isinstance(d, dict):
        raise CalibrationError(f"{where}: expected a JSON object, got {type(d).__name__}")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise CalibrationError(f"{where}: missing key(s) {', '.join(map(repr, missing))}")
    unknown = sorted(set(d) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise CalibrationError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}")
    if d["schema_version"] != SCHEMA_VERSION or isinstance(d["schema_version"], bool):
        raise CalibrationError(f"{where}: unsupported schema_version {d['schema_version']!r} "
                               f"(expected {SCHEMA_VERSION})")
    for key in ("renderer", "device", "driver", "source", "device_profile", "kernels"):
        if key in d and not isinstance(d[key], str):
            raise CalibrationError(f"{where}: {key!r} must be a string, got {d[key]!r}")
    for key in ("renderer", "device"):
        if not d[key]:
            raise CalibrationError(f"{where}: {key!r} must not be empty")
    _check_table(d["scale"], "scale", 0.0, SCALE_MAX, True, where)
    _check_table(d["offset"], "offset", 0.0, OFFSET_MAX, False, where)
    for key, high in (("miss", OFFSET_MAX), ("launch", LAUNCH_MAX)):
        if key in d and d[key] != {}:
            _check_table(d[key], key, 0.0, high, False, where)
            odd = sorted(set(d[key]) - set(d["scale"]))
            if odd:
                raise CalibrationError(f"{where}: {key!r} names component(s) {', '.join(odd)} "
                                       f"that 'scale' does not")
    if "uncertainty" in d and d["uncertainty"] != {}:
        _check_table(d["uncertainty"], "uncertainty", 0.0, math.inf, False, where)
    _check_device_figures(d.get("device_figures", {}), where)
    _check_occupancy(d.get("occupancy", {}), d["scale"], where)
    held = d.get("held", [])
    if not isinstance(held, list | tuple) or not all(isinstance(h, str) and h for h in held):
        raise CalibrationError(f"{where}: 'held' must be a list of parameter names, got "
                               f"{held!r}")
    if set(d["scale"]) != set(d["offset"]):
        odd = sorted(set(d["scale"]) ^ set(d["offset"]))
        raise CalibrationError(f"{where}: 'scale' and 'offset' must name the same components; "
                               f"{', '.join(odd)} in only one")
    fit = d.get("fit", {})
    if not isinstance(fit, dict):
        raise CalibrationError(f"{where}: 'fit' must be an object, got {fit!r}")
    for key, value in fit.items():
        kind = key.split(" ", 1)[0]
        if key not in _FIT_KEYS and kind not in _FIT_PAIR_KEYS:
            raise CalibrationError(f"{where}: unknown key 'fit.{key}' (known: "
                                   f"{', '.join(_FIT_KEYS)}, or '<kind> <pair>' with kind "
                                   f"{' or '.join(_FIT_PAIR_KEYS)})")
        low, high = _FIT_KEYS.get(key) or _FIT_PAIR_KEYS[kind]
        if not _number(value) or not math.isfinite(value) or not low <= value <= high:
            raise CalibrationError(f"{where}: 'fit.{key}' must be a number in "
                                   f"[{low:g}, {high:g}], got {value!r}")


def _check_device_figures(figures: Any, where: str) -> None:
    """Fitted device figures: known profile parameters, each inside its plausible range."""
    if not isinstance(figures, dict):
        raise CalibrationError(f"{where}: 'device_figures' must be an object of device "
                               f"parameter -> number, got {figures!r}")
    for key, value in figures.items():
        try:
            low, high = plausible_range(key)
        except KeyError:
            raise CalibrationError(f"{where}: 'device_figures.{key}' is not a device "
                                   f"parameter") from None
        if not _number(value) or not math.isfinite(value) or not low <= value <= high:
            raise CalibrationError(f"{where}: 'device_figures.{key}' must be a number in "
                                   f"[{low:g}, {high:g}], got {value!r}")


def _check_occupancy(table: Any, scale: dict, where: str) -> None:
    """Occupancy: components the fit has, each a whole number of work-groups in
    [1, OCCUPANCY_MAX]."""
    if not isinstance(table, dict):
        raise CalibrationError(f"{where}: 'occupancy' must be an object of component -> "
                               f"work-groups resident per core, got {table!r}")
    for component, value in table.items():
        if component not in scale:
            raise CalibrationError(f"{where}: 'occupancy' names component {component!r} that "
                                   f"'scale' does not (has {', '.join(scale)})")
        if (not isinstance(value, numbers.Real) or isinstance(value, bool)
                or not math.isfinite(value) or value != int(value)
                or not 1 <= value <= OCCUPANCY_MAX):
            raise CalibrationError(f"{where}: 'occupancy.{component}' must be a whole number of "
                                   f"work-groups resident per core in 1..{OCCUPANCY_MAX}, got "
                                   f"{value!r}")


def load_calibration(path: str | os.PathLike[str]) -> AppCalibration:
    """Read and validate a calibration file; any problem raises one CalibrationError naming it."""
    path = Path(path)
    return AppCalibration.from_dict(read_json(path, CalibrationError, "calibration"),
                                    where=str(path))


def legacy_calibration(d: dict[str, Any], profile: DeviceProfile,
                       where: str) -> AppCalibration | None:
    """The ray tracer's calibration held in an old profile's ``"fitted"`` (None if absent or
    empty: such a profile simply has no calibration). Invalid entries raise naming the key."""
    fitted = d.get("fitted")
    if fitted is None or fitted == {}:
        return None
    if not isinstance(fitted, dict):
        raise CalibrationError(f"{where}: 'fitted' must be an object, got {fitted!r}")
    scale, offset, fit = {}, {}, {}
    for key, value in fitted.items():
        kind, _, component = key.partition("_")
        if kind == "scale" and component:
            scale[component] = value
        elif kind == "offset" and component:
            offset[component] = value
        elif key in ("fit_mean_error", "fit_frames"):
            fit[key.removeprefix("fit_")] = value
        else:
            raise CalibrationError(f"{where}: unknown key 'fitted.{key}'")
    data = {"schema_version": SCHEMA_VERSION, "renderer": LEGACY_RENDERER,
            "device": profile.name, "driver": profile.driver, "scale": scale,
            "offset": offset, "fit": fit, "source": profile.source,
            "device_profile": profile.fingerprint()}
    try:
        return AppCalibration.from_dict(data, where)
    except CalibrationError as exc:  # name the key as the old file spells it
        message = str(exc).replace("'scale.", "'fitted.scale_").replace("'offset.",
                                                                        "'fitted.offset_")
        raise CalibrationError(message) from None


def load_profile_and_calibration(
        path: str | os.PathLike[str]) -> tuple[DeviceProfile, AppCalibration | None]:
    """Read a profile file; an old one that still holds the ray tracer's ``fitted`` values
    also gives that calibration (else None)."""
    path = Path(path)
    data = read_json(path, ProfileError, "profile")
    profile = DeviceProfile.from_dict(data, where=str(path))
    return profile, legacy_calibration(data, profile, str(path))


def builtin_calibrations(machine: str) -> list[AppCalibration]:
    """The shipped calibrations of the devices measured on ``machine``, beside their profiles
    (:data:`~models.device_profile.MACHINES_DIR`)."""
    return [load_calibration(p) for p in sorted((MACHINES_DIR / machine).glob("*--*.json"))]
