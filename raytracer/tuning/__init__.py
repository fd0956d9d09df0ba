"""Ties the ray tracer to the tuner: probe, instruction counts, calibration fit, TunedRenderer."""
