"""Experiments of the reproduced studies (``studies``): cluster prediction, pipeline mapping,
kernel models.
"""
