"""DeviceProfile: JSON round trip, atomic save, validation errors, shipped Table 4 profiles.

A profile holds hardware parameters only; what the ray tracer fits on top of it is an
AppCalibration (tests/test_app_calibration.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import pytest

from governed.mesh.profile_store import save_profile
from models.app_calibration import builtin_calibrations
from models.device_profile import (
    MACHINES_DIR,
    SCHEMA_VERSION,
    DeviceProfile,
    ProfileError,
    builtin_profiles,
    find_profile,
    load_profile,
    machine_profiles,
)


def _profile(**overrides: object) -> DeviceProfile:
    values: dict[str, object] = dict(
        name="test gpu",
        driver="none",
        cores=16,
        warp_size=32,
        issue_cycles=4.0,
        max_blocks_per_core=8,
        clock_ghz=1.0,
        bandwidth_gbs=80.0,
        mem_latency=420.0,
        dep_delay_coal=4.0,
        dep_delay_uncoal=10.0,
    )
    values.update(overrides)
    return DeviceProfile(**values)  # type: ignore[arg-type]


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path


def test_round_trip(tmp_path: Path) -> None:
    p = _profile()
    path = tmp_path / "p.json"
    save_profile(p, path)
    assert load_profile(path) == p
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    assert [f.name for f in tmp_path.iterdir()] == ["p.json"]  # no temp file left behind


def test_save_overwrites_atomically(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    save_profile(_profile(cores=8), path)
    save_profile(_profile(cores=20), path)
    assert load_profile(path).cores == 20
    assert len(list(tmp_path.iterdir())) == 1


def test_defaults_filled_when_optional_fields_absent(tmp_path: Path) -> None:
    d = _profile().to_dict()
    for key in ("bytes_per_access", "transactions_per_uncoal", "source"):
        del d[key]
    p = load_profile(_write(tmp_path, d))
    assert (p.bytes_per_access, p.transactions_per_uncoal, p.source) == (4, 32, "")
    assert "fitted" not in p.to_dict()  # hardware parameters only


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"nope\.json: profile file not found"):
        load_profile(tmp_path / "nope.json")


@pytest.mark.parametrize("text", ["", "not json", '{"schema_version": 1, "name": "x"'])
def test_not_json_or_truncated(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match=r"bad\.json: not valid JSON"):
        load_profile(path)


def test_top_level_not_object(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="expected a JSON object"):
        load_profile(_write(tmp_path, [1, 2]))


@pytest.mark.parametrize("version", [None, 2, "1", True])
def test_schema_version(tmp_path: Path, version: object) -> None:
    d = _profile().to_dict()
    if version is None:
        del d["schema_version"]
    else:
        d["schema_version"] = version
    with pytest.raises(ProfileError, match="schema_version") as err:
        load_profile(_write(tmp_path, d))
    assert "p.json" in str(err.value)


def test_missing_field(tmp_path: Path) -> None:
    d = _profile().to_dict()
    del d["mem_latency"]
    with pytest.raises(ProfileError, match=r"p\.json: missing field 'mem_latency'"):
        load_profile(_write(tmp_path, d))


def test_unknown_field(tmp_path: Path) -> None:
    d = _profile().to_dict()
    d["memlatency"] = 3
    with pytest.raises(ProfileError, match="unknown field.*memlatency"):
        load_profile(_write(tmp_path, d))


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("cores", 16.5, "must be an integer"),
        ("cores", True, "must be an integer"),
        ("cores", 0, "must be positive"),
        ("warp_size", "32", "must be an integer"),
        ("clock_ghz", "1.0", "must be a number"),
        ("clock_ghz", -1.0, "finite and positive"),
        ("bandwidth_gbs", 0, "finite and positive"),
        ("name", 3, "must be a string"),
        ("name", "", "must not be empty"),
        # issue 10: values that passed and wrecked tuning
        ("issue_cycles", 1e-300, "not plausible"),
        ("issue_cycles", 1e300, "not plausible"),
        ("mem_latency", 1e300, "not plausible"),
        ("clock_ghz", 1e6, "not plausible"),
        ("bandwidth_gbs", 1e-9, "not plausible"),
        ("dep_delay_coal", 0.0, "finite and positive"),
        ("cores", 10**9, "not plausible"),
        ("warp_size", 100_000, "not plausible"),
        ("out_of_order", 1, "must be true or false"),
        ("out_of_order", "yes", "must be true or false"),
    ],
)
def test_bad_values(tmp_path: Path, key: str, value: object, problem: str) -> None:
    d = _profile().to_dict()
    d[key] = value
    with pytest.raises(ProfileError, match=problem) as err:
        load_profile(_write(tmp_path, d))
    assert "p.json" in str(err.value) and key in str(err.value)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_inf_rejected(tmp_path: Path, literal: str) -> None:
    text = _profile().to_json().replace('"mem_latency": 420.0', f'"mem_latency": {literal}')
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(ProfileError, match="mem_latency.*finite"):
        load_profile(path)


def test_direct_construction_validated() -> None:
    with pytest.raises(ProfileError, match="clock_ghz"):
        _profile(clock_ghz=math.nan)


def test_builtin_profiles_match_table_4() -> None:
    ps = builtin_profiles()
    assert {"gf8800", "gf580", "radeon5870"} <= set(ps)
    table = {  # M_d, D_c, D_tw, C_i, max b_o, F, c_l, c_dc, c_du
        "gf8800": (86, 16, 32, 4, 8, 1.35, 420, 4, 9.8),
        "gf580": (192, 16, 32, 2, 8, 1.54, 550, 0.08, 0.66),
        "radeon5870": (153, 20, 64, 4, 24, 0.88, 500, 64, 1),
    }
    for key, row in table.items():
        p = ps[key]
        got = (
            p.bandwidth_gbs,
            p.cores,
            p.warp_size,
            p.issue_cycles,
            p.max_blocks_per_core,
            p.clock_ghz,
            p.mem_latency,
            p.dep_delay_coal,
            p.dep_delay_uncoal,
        )
        assert got == row
        assert "Table 4" in p.source and "garbled" in p.source


def test_shipped_calibrations_are_current_and_come_with_their_measured_profile() -> None:
    """What ships for a machine (``models/data/machines/<machine>/``) is a profile measured
    there by ``autotune calibrate --ship`` and the ray-tracer calibration fitted on it, for the
    kernels as they are now: a kernel change that leaves one stale fails here until it is
    refitted on its machine (``autotune calibrate --ship``) or removed."""
    from governed.mesh.instruction_counts import counts_fingerprint

    machines = [p for p in MACHINES_DIR.iterdir() if p.is_dir()] if MACHINES_DIR.is_dir() else []
    for folder in machines:
        profiles = machine_profiles(folder.name)
        calibrations = builtin_calibrations(folder.name)
        assert profiles and len(calibrations) == len(profiles), folder
        for cal in calibrations:
            assert cal.renderer == "raytracer" and set(cal.scale) == {
                "primary", "shadow", "ao", "shade"}
            assert [p for p in profiles if cal.matches(p)], f"{folder}: no profile for {cal}"
            assert cal.kernels.split()[0] == counts_fingerprint(), (
                f"{folder}: {cal.describe()} was fitted for other kernels; refit it on that "
                f"machine with `autotune calibrate --ship`, or remove it")
        assert all("autotune calibrate" in p.source for p in profiles)


def test_find_profile(tmp_path: Path) -> None:
    assert find_profile("gf580") == builtin_profiles()["gf580"]
    path = tmp_path / "mine.json"
    save_profile(_profile(), path)
    assert find_profile(path) == _profile()
    assert find_profile(str(path)) == _profile()
    with pytest.raises(ProfileError, match="neither a built-in profile"):
        find_profile("gf9999")


def test_out_of_order_counts_in_the_fingerprint_only_when_set() -> None:
    # profiles written before the field keep their fingerprint (calibrations record it)
    in_order = _profile()
    params = {k: v for k, v in in_order.to_dict().items() if k not in ("source", "out_of_order")}
    want = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]
    assert in_order.fingerprint() == want
    assert dataclasses.replace(in_order, out_of_order=True).fingerprint() != want
