"""What ties the volume renderer to the tuner: the per-frame workload probe
(``workload_probe``), the knobs and their quality losses (``knobs``), the frame-time model and
its calibration (``model_fit``), and the governed distributed renderer (``tuned_volume``) with
the jobs it hands out: the frame protocol between the ranks (``frame_sharing``), the
calibration frames (``calibration_frames``), the quality measurements (``quality_measures``)
and the frame times found by rendering, the fixed baseline's among them
(``measured_baselines``).

Embedding it in your own distributed loop (run under ``mpiexec -n K python -m mpi4py``; every
call is collective, rank 0 gets the frames; this example is run by the tests on 2 ranks)::

    from raytracer.camera import with_next
    from raytracer.volume.distributed import DistributedRenderer, load_everywhere, seed_orbit
    from governed.volume.model_fit import volume_calibration_views
    from governed.volume.tuned_volume import TunedVolumeRenderer

    volume, tf = load_everywhere("marschner-lobb:32")     # same data on every rank
    renderer = DistributedRenderer(volume, tf)            # one k-d brick per rank
    tuned = TunedVolumeRenderer(renderer, 64, 64, target_seconds=0.05)
    small, small_tf = load_everywhere("marschner-lobb:16")  # another working set beside it
    tuned.calibrate(volume_calibration_views(volume.radius, 4), frames=12,  # views off the path
                    also=[(DistributedRenderer(small, small_tf),
                           volume_calibration_views(small.radius, 4))])
    path = seed_orbit(volume.radius, frames=4)
    for camera, next_camera in with_next(path):
        frame = tuned.render(camera, next_camera)         # choose, render, composite, learn
        if frame is not None:                             # rank 0
            print(f"{frame.measured * 1e3:.1f} ms, step {frame.settings.step:.2f}")

To hold your own renderer at a target instead, give the core ``Tuner`` a predictor on rank 0,
share its ``choose()`` knobs with the other ranks (one
``raytracer.volume.frame_sync.FrameSync`` state per frame), and ``observe()`` rank 0's frame
time.
"""
