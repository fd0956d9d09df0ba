"""The BVH mesh ray tracer: scenes, the SAH BVH, the CPU traversal (probe and reference), the
OpenCL tracer with its kernels and the per-phase registry. Its public names are exported by
``raytracer``.
"""
