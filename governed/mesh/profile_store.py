"""Where calibrated device profiles and application calibrations live, user folder first.

``<dir>/<device-key>.json`` holds a device's hardware parameters (a DeviceProfile);
``<dir>/calibrations/<device-key>--<renderer>.json`` what one renderer fitted on top of it (an
AppCalibration), so calibrating one renderer never overwrites another's. ``<dir>`` is
``$AUTOTUNE_PROFILE_DIR``, else ``~/.cache/autotune/profiles``. Lookups fall back to the files
shipped for this machine (``models/data/machines/<machine>/``, named by
:func:`common.cpu_info.this_machine`: what was measured on another CPU is never used); a user
file that is corrupt, invalid or for another device is reported with one warning naming the
file and the key, and skipped. Every write is atomic
(:mod:`common.atomic_files`). When the folder cannot be written, what was calibrated is kept
in memory for the rest of the process (with one warning) instead of being lost.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from pathlib import Path

from common.atomic_files import OutputError, check_writable_file, write_text
from common.cpu_info import this_machine
from models.app_calibration import (
    AppCalibration,
    CalibrationError,
    builtin_calibrations,
    load_calibration,
    load_profile_and_calibration,
)
from models.device_profile import (
    MACHINES_DIR,
    DeviceProfile,
    ProfileError,
    machine_profiles,
)

PROFILE_DIR_ENV = "AUTOTUNE_PROFILE_DIR"
log = logging.getLogger(__name__)
_SAID: set[tuple[str, ...]] = set()  # the calibrations whose use was logged in this process

# Kept for this process when the store could not be written (see keep_in_memory).
_memory_profiles: dict[tuple[str, str], DeviceProfile] = {}
_memory_calibrations: dict[tuple[str, str, str], AppCalibration] = {}


def profile_dir() -> Path:
    """``$AUTOTUNE_PROFILE_DIR``, else ``~/.cache/autotune/profiles``."""
    env = os.environ.get(PROFILE_DIR_ENV)
    return Path(env) if env else Path.home() / ".cache" / "autotune" / "profiles"


def profile_key(device_name: str, driver: str) -> str:
    """A file-name-safe key for a device and driver version."""
    return re.sub(r"[^a-z0-9]+", "-", f"{device_name} {driver}".lower()).strip("-")


def profile_path(device_name: str, driver: str) -> Path:
    return profile_dir() / f"{profile_key(device_name, driver)}.json"


def calibration_path(device_name: str, driver: str, renderer: str) -> Path:
    """``<profile dir>/calibrations/<device-key>--<renderer>.json``."""
    return profile_dir() / "calibrations" / f"{profile_key(device_name, driver)}--{renderer}.json"


def shipped_path(device_name: str, driver: str) -> Path:
    """Where ``autotune calibrate --ship`` writes this machine's profile of a device (its
    calibrations beside it): ``models/data/machines/<this machine>/<device-key>.json``."""
    return MACHINES_DIR / this_machine() / f"{profile_key(device_name, driver)}.json"


def save_profile(profile: DeviceProfile, path: str | os.PathLike[str]) -> Path:
    """Write a device profile as JSON atomically."""
    return write_text(path, profile.to_json())


def save_calibration(calibration: AppCalibration, path: str | os.PathLike[str]) -> Path:
    """Write an application calibration as JSON atomically."""
    return write_text(path, calibration.to_json())


def _warn(message: str) -> None:
    warnings.warn(message, stacklevel=3)


def _user_profile(device_name: str, driver: str, quiet: bool = False
                  ) -> tuple[DeviceProfile | None, AppCalibration | None]:
    """The user's profile of this device and the calibration an old one still holds."""
    path = profile_path(device_name, driver)
    if not path.exists():
        return None, None
    try:
        profile, legacy = load_profile_and_calibration(path)
    except ProfileError as exc:
        if not quiet:
            _warn(f"ignoring device profile: {exc}; using the shipped profile if there is one "
                  f"(recalibrate with `autotune calibrate`)")
        return None, None
    if (profile.name, profile.driver) != (device_name, driver):
        if not quiet:
            _warn(f"{path}: profile is for {profile.name!r} (driver {profile.driver!r}), not "
                  f"{device_name!r} (driver {driver!r}); ignoring it")
        return None, None
    return profile, legacy


def find_device_profile(device_name: str, driver: str) -> DeviceProfile | None:
    """The calibrated profile of this device: the user's, else a shipped one, else None.

    A user profile that is corrupt, invalid, or written for another device is reported with a
    warning naming the file and the key, and ignored, so the caller falls back to the shipped
    profile or to calibrating.
    """
    if (device_name, driver) in _memory_profiles:
        return _memory_profiles[device_name, driver]
    profile, _ = _user_profile(device_name, driver)
    if profile is not None:
        return profile
    for shipped in machine_profiles(this_machine()):
        if (shipped.name, shipped.driver) == (device_name, driver):
            return shipped
    return None


def find_app_calibration(profile: DeviceProfile, renderer: str,
                         components: tuple[str, ...] = (), kernels: str = ""
                         ) -> AppCalibration | None:
    """What ``renderer`` fitted on the device of ``profile``: the user's, else a shipped one.

    A candidate must be valid, name every one of ``components``, be for this device and, where
    it records them and ``kernels`` names the ones in use, fitted with these kernels' counts;
    one that is not is reported with one warning naming the file and the reason and skipped.
    One fitted with another profile of the same device is used, with a warning to recalibrate.
    None when there is none (the caller calibrates).
    """
    key = (profile.name, profile.driver, renderer)
    if key in _memory_calibrations:
        return _memory_calibrations[key]
    path = calibration_path(profile.name, profile.driver, renderer)
    candidates: list[tuple[str, AppCalibration | None]] = []
    if path.exists():
        try:
            candidates.append((str(path), load_calibration(path)))
        except CalibrationError as exc:
            _warn(f"ignoring calibration: {exc}; using the shipped one if there is one "
                  f"(recalibrate with `autotune calibrate`)")
    else:
        _, legacy = _user_profile(profile.name, profile.driver, quiet=True)  # warned already
        if legacy is not None and legacy.renderer == renderer:
            candidates.append((str(profile_path(profile.name, profile.driver)), legacy))
    machine = this_machine()
    candidates += [(f"shipped {c.describe()} of {machine}", c)
                   for c in builtin_calibrations(machine) if c.renderer == renderer]
    for where, calibration in candidates:
        if (calibration.device, calibration.driver) != (profile.name, profile.driver):
            if not where.startswith("shipped"):
                _warn(f"{where}: calibration is for {calibration.device!r} (driver "
                      f"{calibration.driver!r}), not {profile.name!r}; ignoring it")
            continue
        try:
            calibration.require(components, where)
        except CalibrationError as exc:
            _warn(f"ignoring calibration: {exc}")
            continue
        if kernels and calibration.kernels and calibration.kernels != kernels:
            _warn(f"{where}: fitted for other kernels than these (their instruction counts "
                  f"or how they are launched changed since: {calibration.kernels!r}, now "
                  f"{kernels!r}); ignoring it, recalibrate with `autotune calibrate`")
            continue
        if not calibration.matches(profile):
            _warn(f"{where}: fitted with another device profile of {profile.name!r} than the "
                  f"one in use; recalibrate with `autotune calibrate`")
        said = (renderer, profile.name, profile.driver, where)
        if said not in _SAID:  # once per process: a run may set up several renderers
            _SAID.add(said)
            log.info("pricing frames with the %s calibration of %s (driver %s): %s", renderer,
                     profile.name, profile.driver, where)
        return calibration
    return None


def _check_can_write(path: Path) -> None:
    """Raise OSError (naming the folder) unless ``path`` could be created and written; nothing
    is created here."""
    folder = path.parent
    while not folder.exists():
        if folder.is_symlink():  # a dangling link
            raise OutputError(f"{path}: {folder} is a broken link")
        folder = folder.parent
    if folder == path.parent:
        check_writable_file(path)
    elif not folder.is_dir():
        raise OutputError(f"{path}: {folder} is not a folder")
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: folder {folder} is not writable")


def writable_store(device_name: str, driver: str, renderer: str) -> bool:
    """Whether a calibration of this device and renderer could be stored; ask before the work.

    False, with one warning, when it could not: the caller keeps its results in memory.
    """
    try:
        for path in (profile_path(device_name, driver),
                     calibration_path(device_name, driver, renderer)):
            _check_can_write(path)
    except OSError as exc:
        _warn(f"cannot write the profile store ({exc}); this calibration is kept in memory "
              f"for this run only (set ${PROFILE_DIR_ENV} to a writable folder to keep it)")
        return False
    return True


def store(profile: DeviceProfile, calibration: AppCalibration) -> tuple[Path, Path]:
    """Save a device's profile and one renderer's calibration into the store (atomically)."""
    paths = (profile_path(profile.name, profile.driver),
             calibration_path(profile.name, profile.driver, calibration.renderer))
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    save_profile(profile, paths[0])
    save_calibration(calibration, paths[1])
    return paths


def keep_in_memory(profile: DeviceProfile, calibration: AppCalibration) -> None:
    """Use these for the rest of the process (the store could not be written)."""
    _memory_profiles[profile.name, profile.driver] = profile
    _memory_calibrations[profile.name, profile.driver, calibration.renderer] = calibration
