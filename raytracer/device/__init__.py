"""The device layer: OpenCL runtimes, devices and how kernels are launched on them.

Everything between the renderers and an OpenCL device lives here:

* :mod:`~raytracer.device.runtimes`: the runtimes the ICD loader sees (pip's CPU runtimes, GPU
  driver libraries without an ``.icd`` file), their thread limit and PoCL's work-group method,
  set up by :func:`~raytracer.device.runtimes.prepare_runtimes` before the first platform
  query, never on import;
* :mod:`~raytracer.device.traits`: what a device does here, measured once and cached (builds?
  SIMD width, clock);
* :mod:`~raytracer.device.choice`: listing the devices and choosing the one that renders
  (``--device``, ``$AUTOTUNE_DEVICE``, ``$AUTOTUNE_COMPUTE_UNITS``);
* :mod:`~raytracer.device.launches`: each kernel's work-group and ray packet, chosen per device
  and cached;
* :mod:`~raytracer.device.event_time`: seconds from a profiling event;
* :mod:`~raytracer.device.nvidia`: what NVIDIA's driver says of a device and a built program
  (compute capability, registers, its PTX).

numba's on-disk cache for the CPU kernels is :mod:`common.jit_cache` (the tuner compiles
too), the user's cache folder :mod:`common.cache_folder`.
"""
