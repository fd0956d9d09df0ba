"""Shared fixtures: small scenes and one OpenCL tracer per scene for the whole session."""

from __future__ import annotations

import os
import shutil
import tempfile
import warnings

import pytest

from raytracer.mesh.scene import load_scene


def pytest_configure(config) -> None:
    """Profiles and calibrations a test run measures go to a private folder, never the user's
    store (a quick calibration kept there would shadow the shipped one afterwards)."""
    os.environ["AUTOTUNE_PROFILE_DIR"] = tempfile.mkdtemp(prefix="autotune-test-profiles-")


def pytest_unconfigure(config) -> None:
    """The private profile folder goes when the run ends (one was left per run)."""
    shutil.rmtree(os.environ.pop("AUTOTUNE_PROFILE_DIR", ""), ignore_errors=True)


@pytest.fixture(scope="session")
def scenes():
    """Scenes loaded once (loading and BVH building cost tenths of a second each)."""
    cache = {}

    def get(name: str):
        if name not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name] = load_scene(name)
        return cache[name]

    return get


@pytest.fixture(scope="session")
def tracers(scenes):
    """One OpenCL Tracer per scene name, built on first use. With ``counters`` every kernel
    traces a ray per work-item (the default launches): those counters are the ones the CPU twin
    reproduces; the primary kernel's packet form has its own tests (test_ray_packets.py)."""
    from raytracer.device.launches import DEFAULTS
    from raytracer.mesh.tracer import Tracer

    cache = {}

    def get(name: str, counters: bool = False):
        key = (name, counters)
        if key not in cache:
            cache[key] = Tracer(scenes(name), counters=counters,
                                launches=DEFAULTS if counters else None)
        return cache[key]

    return get
