"""Two CPU devices measured on an earlier machine (a PoCL and an Intel runtime on an AMD EPYC),
with the ray-tracer calibrations fitted on them for earlier kernels: shipped once, test data
now (tests/data/recorded_devices), so that no test depends on what ships for a machine."""

from __future__ import annotations

from pathlib import Path

from models.device_profile import DeviceProfile, builtin_profiles, load_profile

RECORDED = Path(__file__).parent / "data" / "recorded_devices"


def recorded_profiles() -> dict[str, DeviceProfile]:
    """The recorded devices' profiles by file stem."""
    return {p.stem: load_profile(p) for p in sorted(RECORDED.glob("*.json"))
            if "--" not in p.stem}


def every_profile() -> dict[str, DeviceProfile]:
    """The seeds' profiles and the recorded devices', by file stem."""
    return builtin_profiles() | recorded_profiles()
