"""GPU device profiles for the Hong–Kim model: dataclass, validated JSON load/save, built-ins."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

from models.json_file import read_json

SCHEMA_VERSION = 1

PROFILE_DIR = Path(__file__).parent / "data" / "profiles"

_STR_FIELDS = ("name", "driver", "source")
_INT_FIELDS = (
    "cores",
    "warp_size",
    "max_blocks_per_core",
    "bytes_per_access",
    "transactions_per_uncoal",
)
_FLOAT_FIELDS = (
    "issue_cycles",
    "clock_ghz",
    "bandwidth_gbs",
    "mem_latency",
    "dep_delay_coal",
    "dep_delay_uncoal",
)


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
    for key in _INT_FIELDS:
        value = values[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise ProfileError(f"{where}: field {key!r} must be an integer, got {value!r}")
        if value <= 0:
            raise ProfileError(f"{where}: field {key!r} must be positive, got {value}")
    for key in _FLOAT_FIELDS:
        value = values[key]
        if not _is_number(value):
            raise ProfileError(f"{where}: field {key!r} must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise ProfileError(f"{where}: field {key!r} must be finite and positive, got {value}")
    fitted = values["fitted"]
    if not isinstance(fitted, dict):
        raise ProfileError(f"{where}: field 'fitted' must be an object, got {fitted!r}")
    for key, value in fitted.items():
        if not isinstance(key, str):
            raise ProfileError(f"{where}: 'fitted' key {key!r} must be a string")
        if not _is_number(value) or not math.isfinite(value):
            raise ProfileError(f"{where}: 'fitted' entry {key!r} must be a finite number")


@dataclass(frozen=True)
class DeviceProfile:
    """Device parameters of the Hong–Kim model (seed 002 Table 4 names in comments)."""

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
    source: str = ""  # where the numbers come from
    fitted: dict[str, float] = field(default_factory=dict, hash=False)  # e.g. "scale_primary"

    def __post_init__(self) -> None:
        _check_values(self.to_dict(), f"profile {self.name!r}")
        for key in _FLOAT_FIELDS:  # JSON and callers may give ints; store floats
            object.__setattr__(self, key, float(getattr(self, key)))
        object.__setattr__(self, "fitted", {k: float(v) for k, v in self.fitted.items()})

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields plus ``schema_version``, the JSON layout on disk."""
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = dict(value) if f.name == "fitted" else value
        return out

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
        unknown = sorted(set(d) - set(known) - {"schema_version"})
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


def save_profile(profile: DeviceProfile, path: str | os.PathLike[str]) -> None:
    """Write ``profile`` as JSON atomically (temp file in the same folder, then rename)."""
    path = Path(path)
    text = profile.to_json()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_profile(path: str | os.PathLike[str]) -> DeviceProfile:
    """Read and validate a profile JSON file; any problem raises one ProfileError naming it."""
    path = Path(path)
    data = read_json(path, ProfileError, "profile")
    return DeviceProfile.from_dict(data, where=str(path))


@lru_cache(maxsize=1)
def _builtin_profiles() -> tuple[tuple[str, DeviceProfile], ...]:
    return tuple((p.stem, load_profile(p)) for p in sorted(PROFILE_DIR.glob("*.json")))


def builtin_profiles() -> dict[str, DeviceProfile]:
    """The shipped profiles by file stem: seed 002 Table 4 ("gf8800", "gf580", "radeon5870")
    and devices measured here with ``autotune calibrate`` ("pocl-...")."""
    return dict(_builtin_profiles())


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
