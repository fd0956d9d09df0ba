"""The MPI runtime that never hangs, split by job: a failing rank ends the whole job.

A plain mpi4py launch hangs forever when one rank raises while the others wait in a
collective (measured with mpich's wheel: the job never returns). The modules here close every
way to get there, each doing one job; import from the module that does it:

- :mod:`~raytracer.mpi.faults`: the world communicator, aborting the job on any rank's
  uncaught exception, and errors agreed on every rank before a collective;
- :mod:`~raytracer.mpi.watchdog`: aborting the job, naming the phase, when a blocking phase
  runs past its timeout;
- :mod:`~raytracer.mpi.pinning`: how the ranks on one machine split its cores;
- :mod:`~raytracer.mpi.launch`: running ``mpiexec`` and naming the rank a failed job lost;
- :mod:`~raytracer.mpi.shared_memory`: removing the shared-memory segments a failed job left;
- :mod:`~raytracer.mpi.rank_sentinel`: the parent of each rank's process, which tells
  :func:`~raytracer.mpi.launch.launch` which rank a signal killed.

Everything works without mpiexec as a one-process world. The volume renderer's frame loop
(:mod:`raytracer.volume.distributed`), the pipeline-mapping runtime and the benchmarks use it.
"""
