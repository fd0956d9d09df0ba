"""Frame-time predictors compared for the kernel-model study: per-part, ray-tracer and volume
predictors, analytical against learned, offline and online.
"""
