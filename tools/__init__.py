"""Build-time and developer tools (PTX instruction counts, PoCL kernel-call check, asset
packing); run from a checkout of the repository, never imported by the packages."""
