"""Headless experiments. Each module has ``main(argv) -> int`` and is run as ``autotune bench NAME``."""
