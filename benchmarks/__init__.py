"""Headless experiments: each module has ``main(argv) -> int``, run as ``autotune bench NAME``."""
