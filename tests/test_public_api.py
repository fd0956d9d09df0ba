"""Each layer's public API is importable from its package, as the README shows it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

PACKAGES = ["autotune", "models", "raytracer", "governed.mesh"]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if getattr(module, name, None) is None]
    assert not missing, f"{package} exports names it does not have: {missing}"


def test_the_readme_imports():
    from autotune import CONTROLLERS, KnobSpace, Tuner  # noqa: F401
    from governed.mesh import Probe, TunedRenderer, calibrate  # noqa: F401
    from models import DeviceProfile, Workload, predict_frame_seconds  # noqa: F401
    from raytracer import Camera, RenderSettings, Tracer, build_bvh, load_scene  # noqa: F401

    assert list(CONTROLLERS) == ["feedforward", "fixed", "pi"]


def test_an_unknown_name_is_an_attribute_error():
    import raytracer

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        raytracer.nope  # noqa: B018


def test_the_probe_does_not_pull_in_opencl():
    """The CPU probe runs where there is no OpenCL; importing it must not load pyopencl."""
    code = ("import sys; import raytracer, governed.mesh.probe; "
            "print('pyopencl' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
