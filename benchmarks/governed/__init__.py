"""The governed renderers at a target: frame error, image quality and the tuner's cost, per
controller; the ray tracer's model on held-out frames; the probe's cost; the GPU check.
"""
