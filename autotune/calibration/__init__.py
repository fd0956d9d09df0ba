"""Device calibration: OpenCL microbenchmarks that measure a Hong–Kim DeviceProfile."""

from autotune.calibration.microbench import (
    DepartureFit,
    MicrobenchError,
    MicrobenchResult,
    default_device,
    default_max_blocks_per_core,
    device_at,
    fit_departure_delay,
    measure_device_profile,
    profile_from_microbench,
    run_microbench,
    warp_size_of,
)

__all__ = [
    "DepartureFit",
    "MicrobenchError",
    "MicrobenchResult",
    "default_device",
    "default_max_blocks_per_core",
    "device_at",
    "fit_departure_delay",
    "measure_device_profile",
    "profile_from_microbench",
    "run_microbench",
    "warp_size_of",
]
