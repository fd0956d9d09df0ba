"""Performance models as pure functions of numbers: no OpenCL, no MPI, no I/O but JSON."""
