"""Performance models as pure functions of numbers: no OpenCL, no MPI, no I/O but JSON.

Floor 1 of the layers (docs/architecture.md): imports only ``common``, beside the tuner and
the renderers, which it never imports. The ray tracer's model::

    from models import builtin_profiles, predict_frame_seconds, Workload
"""

from models.app_calibration import (
    AppCalibration,
    CalibrationError,
    builtin_calibrations,
    load_calibration,
    load_profile_and_calibration,
)
from models.device_profile import (
    DeviceProfile,
    ProfileError,
    builtin_profiles,
    find_profile,
    load_profile,
)
from models.hong_kim import HongKimResult, KernelLaunch, predict_cycles, predict_seconds
from models.raytrace_cost import (
    PHASES,
    KernelCounts,
    LoopCounts,
    PhaseInstructions,
    phase_instructions,
    predict_frame_seconds,
    predict_frame_seconds_batch,
    predict_phase_seconds,
)
from models.workload import Workload

__all__ = [
    "PHASES",
    "AppCalibration",
    "CalibrationError",
    "DeviceProfile",
    "HongKimResult",
    "KernelCounts",
    "KernelLaunch",
    "LoopCounts",
    "PhaseInstructions",
    "ProfileError",
    "Workload",
    "builtin_calibrations",
    "builtin_profiles",
    "find_profile",
    "load_calibration",
    "load_profile",
    "load_profile_and_calibration",
    "phase_instructions",
    "predict_cycles",
    "predict_frame_seconds",
    "predict_frame_seconds_batch",
    "predict_phase_seconds",
    "predict_seconds",
]
