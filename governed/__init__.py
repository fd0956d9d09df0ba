"""The layer where a renderer meets the tuner and the cost models: tuned renderers, workload
probes, calibration. ``governed.mesh`` governs the mesh ray tracer, ``governed.volume`` the
distributed volume renderer. Imports ``autotune``, ``models``, ``raytracer`` and ``common``.
"""
