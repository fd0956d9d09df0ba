"""The applications on top of the libraries: the ``autotune`` command, the viewer, the demo."""
