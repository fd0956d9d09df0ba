"""The helper process of a first BVH build: compiles the build's task phase and collapse into
numba's cache while the build compiles its top phase
(:func:`raytracer.mesh.bvh.build.compile_task_phase_and_finish`)."""

from raytracer.mesh.bvh.build import compile_task_phase_and_finish

if __name__ == "__main__":
    compile_task_phase_and_finish()
