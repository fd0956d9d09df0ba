"""GPU device profiles for the Hong–Kim model: hardware parameters only, validated, built-ins.

What an application fits on top of a device (the ray tracer's per-phase scale and offset) is
an :class:`models.app_calibration.AppCalibration`, stored apart. Reading is here; writing goes
through ``governed.mesh.profile_store`` (atomic files). The parameters are those of Table 4 of
Ganestam & Doggett, "Auto-tuning Interactive Ray Tracing using an Analytical GPU Architecture
Model".
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import MISSING, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from common.json_file import read_json

SCHEMA_VERSION = 1

PROFILE_DIR = Path(__file__).parent / "data" / "profiles"  # the seeds' devices (Table 4)
#: Devices measured here, one folder per machine (:func:`common.cpu_info.this_machine`): each
#: device's profile ``<device-key>.json`` beside what a renderer fitted on it,
#: ``<device-key>--<renderer>.json`` (``autotune calibrate --ship`` writes them)
MACHINES_DIR = Path(__file__).parent / "data" / "machines"

_STR_FIELDS = ("name", "driver", "source")
_BOOL_FIELDS = ("out_of_order",)
# Physical ranges, inclusive: wide enough for any CPU or GPU (and for the calibration fit, which
# moves latencies and delays up to 1000x from the microbenchmarks), narrow enough that a typo,
# a zero or a 1e300 cannot pass. Units in DeviceProfile's comments.
_INT_RANGES = {
    "cores": (1, 100_000),
    "warp_size": (1, 1024),
    "max_blocks_per_core": (1, 1024),
    "bytes_per_access": (1, 1024),
    "transactions_per_uncoal": (1, 1024),
}
_FLOAT_RANGES = {
    "issue_cycles": (1e-4, 1e5),
    "clock_ghz": (1e-3, 100.0),
    "bandwidth_gbs": (1e-3, 1e6),
    "mem_latency": (1e-3, 1e7),
    "dep_delay_coal": (1e-6, 1e6),
    "dep_delay_uncoal": (1e-6, 1e6),
}
_INT_FIELDS = tuple(_INT_RANGES)
_FLOAT_FIELDS = tuple(_FLOAT_RANGES)


def plausible_range(key: str) -> tuple[float, float]:
    """The range a profile's ``key`` must lie in to load (what a fit may move it to)."""
    return (_INT_RANGES | _FLOAT_RANGES)[key]
# Keys older files may hold that are not device parameters: the ray tracer's fitted scale and
# offset lived in the profile as "fitted" until they moved to models.app_calibration. They are
# accepted (and validated) there; DeviceProfile.from_dict skips them.
LEGACY_KEYS = ("fitted",)


class ProfileError(ValueError):
    """A device profile is missing, unreadable or invalid; the message names file and problem."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_values(values: dict[str, Any], where: str) -> None:
    """Raise ProfileError unless every DeviceProfile field in ``values`` has a valid value."""
    for key in _STR_FIELDS:
        if not isinstance(values[key], str):
            raise ProfileError(f"{where}: field {key!r} must be a string, got {values[key]!r}")
    if not values["name"]:
        raise ProfileError(f"{where}: field 'name' must not be empty")
    for key in _BOOL_FIELDS:
        if not isinstance(values[key], bool):
            raise ProfileError(f"{where}: field {key!r} must be true or false, got "
                               f"{values[key]!r}")
    for key, (low, high) in _INT_RANGES.items():
        value = values[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProfileError(f"{where}: field {key!r} must be an integer, got {value!r}")
        if value <= 0:
            raise ProfileError(f"{where}: field {key!r} must be positive, got {value}")
        if not low <= value <= high:
            raise ProfileError(f"{where}: field {key!r} = {value} is not plausible "
                               f"(expected {low}..{high})")
    for key, (low, high) in _FLOAT_RANGES.items():
        value = values[key]
        if not _is_number(value):
            raise ProfileError(f"{where}: field {key!r} must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise ProfileError(f"{where}: field {key!r} must be finite and positive, got {value}")
        if not low <= value <= high:
            raise ProfileError(f"{where}: field {key!r} = {value:g} is not plausible "
                               f"(expected {low:g}..{high:g})")


@dataclass(frozen=True)
class DeviceProfile:
    """Device parameters of the Hong–Kim model (Ganestam & Doggett's Table 4 names in comments)."""

    name: str
    driver: str
    cores: int  # D_c: streaming multiprocessors (NVIDIA) / SIMD engines (AMD)
    warp_size: int  # D_tw: threads per warp / wavefront
    issue_cycles: float  # C_i: cycles to issue one instruction of a warp
    max_blocks_per_core: int  # max b_o: occupancy limit
    clock_ghz: float  # F
    bandwidth_gbs: float  # M_d
    mem_latency: float  # c_ml (Hong–Kim Mem_LD), cycles
    dep_delay_coal: float  # c_dc, cycles
    dep_delay_uncoal: float  # c_du, cycles per transaction
    bytes_per_access: int = 4  # bytes per thread per memory instruction (for M_w)
    transactions_per_uncoal: int = 32  # #Uncoal_per_mw: transactions per uncoalesced warp access
    # a core runs one thread's independent instructions out of order (CPUs): work issued ahead
    # of a loop, such as the next AO ray's set-up, overlaps it instead of adding to it
    out_of_order: bool = False
    source: str = ""  # where the numbers come from

    def __post_init__(self) -> None:
        _check_values(self.to_dict(), f"profile {self.name!r}")
        for key in _FLOAT_FIELDS:  # JSON and callers may give ints; store floats
            object.__setattr__(self, key, float(getattr(self, key)))

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields plus ``schema_version``, the JSON layout on disk."""
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for f in fields(self):
            out[f.name] = getattr(self, f.name)
        return out

    def fingerprint(self) -> str:
        """A short hash of the model parameters (not ``source``): an application calibration
        records the one it was fitted with, so a changed profile is noticed."""
        params = {k: v for k, v in self.to_dict().items() if k != "source"}
        if not self.out_of_order:  # added later: profiles without it keep their fingerprint
            del params["out_of_order"]
        text = json.dumps(params, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def to_json(self) -> str:
        """Serialise to indented JSON (strict: no NaN/inf) for saving or shipping."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, d: Any, where: str = "<profile dict>") -> DeviceProfile:
        """Build a profile from parsed JSON, validating schema, fields, types and values."""
        if not isinstance(d, dict):
            raise ProfileError(f"{where}: expected a JSON object, got {type(d).__name__}")
        if "schema_version" not in d:
            raise ProfileError(f"{where}: missing 'schema_version' (expected {SCHEMA_VERSION})")
        version = d["schema_version"]
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise ProfileError(
                f"{where}: unsupported schema_version {version!r} (expected {SCHEMA_VERSION})"
            )
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(d) - set(known) - {"schema_version", *LEGACY_KEYS})
        if unknown:
            raise ProfileError(f"{where}: unknown field(s) {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for key, f in known.items():
            if key in d:
                values[key] = d[key]
            elif f.default is not MISSING:
                values[key] = f.default
            elif f.default_factory is not MISSING:
                values[key] = f.default_factory()
            else:
                raise ProfileError(f"{where}: missing field {key!r}")
        _check_values(values, where)
        return cls(**values)


def load_profile(path: str | os.PathLike[str]) -> DeviceProfile:
    """Read and validate a profile JSON file; any problem raises one ProfileError naming it."""
    path = Path(path)
    data = read_json(path, ProfileError, "profile")
    return DeviceProfile.from_dict(data, where=str(path))


@lru_cache(maxsize=1)
def _builtin_profiles() -> tuple[tuple[str, DeviceProfile], ...]:
    return tuple((p.stem, load_profile(p)) for p in sorted(PROFILE_DIR.glob("*.json")))


def builtin_profiles() -> dict[str, DeviceProfile]:
    """The seeds' profiles by file stem: Ganestam & Doggett's Table 4 ("gf8800", "gf580",
    "radeon5870")."""
    return dict(_builtin_profiles())


def machine_profiles(machine: str) -> list[DeviceProfile]:
    """The profiles measured on ``machine`` and shipped (:data:`MACHINES_DIR`); none for a
    machine nobody measured."""
    return [load_profile(p) for p in sorted((MACHINES_DIR / machine).glob("*.json"))
            if "--" not in p.stem]


def find_profile(name_or_path: str | os.PathLike[str]) -> DeviceProfile:
    """Return the built-in profile of that key, else load the profile file at that path."""
    builtins = builtin_profiles()
    key = str(name_or_path)
    if key in builtins:
        return builtins[key]
    path = Path(name_or_path)
    if not path.exists():
        raise ProfileError(
            f"{path}: neither a built-in profile ({', '.join(sorted(builtins))}) nor a file"
        )
    return load_profile(path)
