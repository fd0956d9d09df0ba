"""Run the benchmark, or with ``--worker PART ...`` one MPI part of it (``python -m mpi4py -m``)."""

from benchmarks.studies.cluster_prediction.command import main

if __name__ == "__main__":
    raise SystemExit(main())
