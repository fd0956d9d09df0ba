"""Each layer's public API is importable from its package, as the README shows it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import raytracer

PACKAGES = ["autotune", "models", "raytracer", "governed.mesh"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert not missing, f"{package} exports names it does not have: {missing}"


def test_the_readme_imports():
    from autotune import CONTROLLERS, KnobSpace, Tuner  # lazy: a README line under test
    from governed.mesh import Probe, TunedRenderer, calibrate  # lazy: a README line under test
    from models import (  # lazy: a README line under test
        DeviceProfile,
        Workload,
        predict_frame_seconds,
    )
    from raytracer import (  # lazy: a README line under test
        Camera,
        RenderSettings,
        Tracer,
        build_bvh,
        load_scene,
    )

    assert list(CONTROLLERS) == ["feedforward", "fixed", "pi", "governor"]
    assert all(map(callable, (KnobSpace, Tuner, Probe, TunedRenderer, calibrate, DeviceProfile,
                              Workload, predict_frame_seconds, Camera, RenderSettings, Tracer,
                              build_bvh, load_scene)))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        raytracer.nope  # noqa: B018


def test_the_probe_does_not_pull_in_opencl():
    """The CPU probe runs where there is no OpenCL; importing it must not load pyopencl."""
    code = ("import sys; import raytracer, governed.mesh.probe; "
            "print('pyopencl' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
