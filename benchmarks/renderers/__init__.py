"""The renderers alone, against reference renderers: ray throughput against Embree, the volume
caster against VTK, image compositing against a memory copy; and the first render after
installing, with empty caches.
"""
