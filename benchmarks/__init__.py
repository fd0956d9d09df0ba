"""Headless experiments: each module has ``main(argv) -> int``, run as ``autotune bench NAME``.

The top floor of the layers (docs/architecture.md): may import every layer; nothing imports
it (the CLI runs a benchmark by name). Results go to ``results/<machine>/``."""
