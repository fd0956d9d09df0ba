"""The applications on top of the libraries: the ``autotune`` command, the viewer, the demo.

Floor 4 of the layers (docs/architecture.md): may import every layer below it; only the
benchmarks sit above it."""
