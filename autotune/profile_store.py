"""Where calibrated device profiles live: one JSON per device and driver, user dir first."""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

from models.device_profile import DeviceProfile, ProfileError, builtin_profiles, load_profile

PROFILE_DIR_ENV = "AUTOTUNE_PROFILE_DIR"


def profile_dir() -> Path:
    """``$AUTOTUNE_PROFILE_DIR``, else ``~/.cache/autotune/profiles``."""
    env = os.environ.get(PROFILE_DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "autotune" / "profiles"


def profile_key(device_name: str, driver: str) -> str:
    """A file-name-safe key for a device and driver version."""
    return re.sub(r"[^a-z0-9]+", "-", f"{device_name} {driver}".lower()).strip("-")


def profile_path(device_name: str, driver: str) -> Path:
    return profile_dir() / f"{profile_key(device_name, driver)}.json"


def find_device_profile(device_name: str, driver: str) -> DeviceProfile | None:
    """The calibrated profile of this device: the user's, else a shipped one, else None.

    A user profile that is corrupt, or written for another device, is reported with a warning
    and ignored, so the caller falls back to calibrating.
    """
    path = profile_path(device_name, driver)
    if path.exists():
        try:
            profile = load_profile(path)
        except ProfileError as exc:
            warnings.warn(f"ignoring device profile: {exc}; recalibrate with "
                          f"`autotune calibrate`", stacklevel=2)
        else:
            if (profile.name, profile.driver) == (device_name, driver):
                return profile
            warnings.warn(f"{path}: profile is for {profile.name!r} (driver {profile.driver!r}),"
                          f" not {device_name!r} (driver {driver!r}); ignoring it", stacklevel=2)
    for profile in builtin_profiles().values():
        if (profile.name, profile.driver) == (device_name, driver):
            return profile
    return None
