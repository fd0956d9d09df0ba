"""General utilities under every layer: files written atomically, versioned JSON, image
quality (SSIM/PSNR), lazy package exports. Imports nothing of this project.
"""
