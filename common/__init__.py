"""General utilities under every layer: files written atomically, versioned JSON, image
quality (SSIM/PSNR), lazy package exports, the garbage collector kept out of the frames, the
user's cache folder and numba's cache keyed on the sources a compiled function reads. Imports
nothing of this project above it.
"""
