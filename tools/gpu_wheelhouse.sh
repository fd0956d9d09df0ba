#!/usr/bin/env bash
# Download, into .whl/ (ignored by git), the wheels a GPU machine's image lacks for the GPU
# check (`autotune bench gpu`): CPython 3.12, manylinux x86-64. That image has numpy, scipy,
# numba, scikit-learn, matplotlib, pillow, tqdm and mpi4py but no pyopencl, and it cannot
# reach a package index, so the wheels travel with the working tree (64 MiB a call in all).
#
#   bash tools/gpu_wheelhouse.sh            # here, with pip and network
#   # there, from the repository root:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   PYTHONPATH=/tmp/site python3 -m autotune_app.cli bench gpu
#
# One version of each package (two stop the install). The project itself is built as a wheel
# too, so the check can also run from an installed copy.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
DEST=.whl
# pyopencl and what it needs beyond the image (pytools, platformdirs, siphash24); the mesh and
# volume readers; MPICH for mpi4py, whose pip wheel has no MPI library of its own
PACKAGES=(pyopencl pytools platformdirs siphash24 trimesh pynrrd nibabel mpich)
PLATFORMS=()
for tag in manylinux_2_17 manylinux_2_24 manylinux_2_27 manylinux_2_28 manylinux_2_31 \
           manylinux_2_34 manylinux2014 manylinux1; do
  PLATFORMS+=(--platform "${tag}_x86_64")
done

grep -qxF '/.whl*/' .git/info/exclude 2>/dev/null || echo '/.whl*/' >> .git/info/exclude
rm -rf "$DEST.partial" && mkdir -p "$DEST.partial"
"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" -d "$DEST.partial" "${PACKAGES[@]}"
"$PYTHON" -m pip wheel -q --no-deps -w "$DEST.partial" .
rm -rf "$DEST" && mv "$DEST.partial" "$DEST"
du -ch "$DEST"/*.whl | tail -1
ls "$DEST"
