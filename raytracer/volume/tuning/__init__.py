"""What ties the volume renderer to the tuner: the per-frame workload probe, calibration, the
governed distributed renderer."""
