"""BVH ray tracer: scenes, cameras, SAH BVH, CPU probe/reference and the OpenCL tracer."""
