"""``autotune bench kernel-models``: GPU execution-time prediction, BSP vs learned, on this machine.

One module per job: ``launches`` (the nine kernels' launches and features), ``opencl_timing``
(timing them), ``predictions``, ``tables`` (tables and goals), ``plots``, ``command`` (``main``).
"""

from benchmarks.studies.kernel_models.command import main

__all__ = ["main"]
