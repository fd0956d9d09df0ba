#!/usr/bin/env bash
# The GPU check on a lent GPU machine, from the repository root, after tools/gpu_wheelhouse.sh
# filled .whl/ here and the call carried it:
#
#   AUTOTUNE_COMMIT=<commit> bash tools/gpu_check.sh OUT_DIR SECONDS [bench gpu options...]
#
# (the copy of the checkout there has no git history: name the commit that travels)
# Installs the wheels into /tmp/site (once per machine), reports the driver, the OpenCL ICD
# files and NVIDIA's OpenCL library, traces the GPU's clocks, then runs `autotune bench gpu`
# for at most SECONDS into /tmp/gpu-check. What comes back is five files at most (the device
# tool returns eight): results.json, check.log, machine.txt, clocks.csv and gpu-check.tar.gz
# with everything else (the volume run's frames left out). Caches (numba, device traits,
# kernel launches) stay in /tmp between calls to the same machine.
set -uo pipefail
OUT_DIR=${1:?usage: tools/gpu_check.sh OUT_DIR SECONDS [bench gpu options]}
SECONDS_LIMIT=${2:?usage: tools/gpu_check.sh OUT_DIR SECONDS [bench gpu options]}
shift 2
WORK=/tmp/gpu-check
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1
# NVIDIA's compiler caches builds and a cached build prints no ptxas figures (-cl-nv-verbose)
export CUDA_CACHE_DISABLE=1
export AUTOTUNE_CACHE_DIR=/tmp/autotune-cache NUMBA_CACHE_DIR=/tmp/numba-cache
if [ ! -f /tmp/site/.installed ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || exit 3
  touch /tmp/site/.installed
fi
export PYTHONPATH="$PWD:/tmp/site"
export PATH="/tmp/site/bin:$PATH"
{
  echo "== machine"; nproc; python3 --version
  python3 -c 'import numpy, numba, scipy; print("numpy", numpy.__version__, "numba",
numba.__version__, "scipy", scipy.__version__)'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv 2>&1
  echo "== OpenCL ICD files"; ls -l /etc/OpenCL/vendors 2>&1; cat /etc/OpenCL/vendors/*.icd 2>&1
  echo "== NVIDIA OpenCL library"
  ldconfig -p 2>/dev/null | grep -i -E 'opencl|libcuda\.so' | head
  ls /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu 2>/dev/null \
    | grep -i -E 'opencl|libcuda\.so' | head
} 2>&1 | tee "$OUT_DIR/machine.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,utilization.gpu,power.draw \
  --format=csv -lms 250 > "$OUT_DIR/clocks.csv" 2>&1 &
CLOCKS=$!
rm -rf "$WORK"
timeout "$SECONDS_LIMIT" python3 -m autotune_app.cli bench gpu -o "$WORK" "$@" 2>&1 \
  | tee "$OUT_DIR/check.log"
kill "$CLOCKS" 2>/dev/null
cp "$WORK/results.json" "$OUT_DIR/" 2>/dev/null
tar czf "$OUT_DIR/gpu-check.tar.gz" --exclude='frame_*.png' -C "$(dirname "$WORK")" \
  "$(basename "$WORK")"
