"""The rendering libraries: the BVH mesh ray tracer (``mesh``), the distributed volume renderer
(``volume``), and what both use: the OpenCL device layer (``device``), the MPI runtime (``mpi``)
and the camera.

Floor 1 of the layers (docs/architecture.md): imports only ``common``; neither the tuner nor
the models (``governed`` ties them together). The mesh tracer's public names are here::

    from raytracer import load_scene, Tracer, RenderSettings
    scene = load_scene("dragon")
    frame = Tracer(scene).render(scene.camera, 640, 360, RenderSettings(ao_rays=8))

Names load on first use, so importing one part (the CPU probe) does not pull in OpenCL. Importing
sets nothing up: the OpenCL runtimes are readied by the device layer (:mod:`raytracer.device`)
before its first platform query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from common.lazy_exports import lazy_exports

_EXPORTS = {
    "mesh.scene": ("SCENES", "Scene", "SceneError", "load_scene"),
    "camera": ("Camera", "load_path", "orbit_path", "turn_path"),
    "mesh.bvh": ("BVH", "build_bvh"),
    "mesh.tracer": ("MAX_AO_RAYS", "Frame", "RenderSettings", "Tracer", "TracerError"),
    "device.choice": ("DeviceError", "DeviceInfo", "choose_device", "list_devices"),
    "mesh.phases": ("PHASES", "PHASE_LIST", "TILE", "Phase"),
    "mesh.cpu_render": ("render_cpu",),
}
__all__ = [
    "BVH",
    "Camera",
    "DeviceError",
    "DeviceInfo",
    "Frame",
    "MAX_AO_RAYS",
    "PHASES",
    "PHASE_LIST",
    "Phase",
    "RenderSettings",
    "SCENES",
    "Scene",
    "SceneError",
    "TILE",
    "Tracer",
    "TracerError",
    "build_bvh",
    "choose_device",
    "list_devices",
    "load_path",
    "load_scene",
    "orbit_path",
    "render_cpu",
    "turn_path",
]

if TYPE_CHECKING:
    from raytracer.camera import Camera, load_path, orbit_path, turn_path
    from raytracer.device.choice import DeviceError, DeviceInfo, choose_device, list_devices
    from raytracer.mesh.bvh import BVH, build_bvh
    from raytracer.mesh.cpu_render import render_cpu
    from raytracer.mesh.phases import PHASE_LIST, PHASES, TILE, Phase
    from raytracer.mesh.scene import SCENES, Scene, SceneError, load_scene
    from raytracer.mesh.tracer import MAX_AO_RAYS, Frame, RenderSettings, Tracer, TracerError


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
