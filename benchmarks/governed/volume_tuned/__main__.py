"""Run the benchmark, or with ``--worker`` one rank of its MPI job (``python -m mpi4py -m``)."""

from benchmarks.governed.volume_tuned.command import main

if __name__ == "__main__":
    raise SystemExit(main())
