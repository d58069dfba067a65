#!/usr/bin/env bash
# The one script to run on a GPU machine that has no network (CuPy, numpy, pybind11,
# pytest, hypothesis and torch are already installed there): install the package,
# run the GPU tests and both benchmarks at GPU sizes, and write everything into the
# folder named by the first argument, in well under 10 minutes.
#
#   bash benchmarks/gpu_check.sh "$OUT"
#
# Pure-Python dependencies missing on that image (ml_dtypes, scipy, safetensors, rich,
# scikit-learn, matplotlib) can travel as wheels in .whl/ (see README, "GPU runs").
# At most 7 files are written: gpu_check.log and, per benchmark, two JSON and a PNG.
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu_check.sh OUT_DIR}
mkdir -p "$out"
cd "$(dirname "$0")/.."
log="$out/gpu_check.log"
export PYTHONUNBUFFERED=1 MTA_HYPOTHESIS_PROFILE=ci
step() { echo "=== $* ($(date -u +%H:%M:%S))" | tee -a "$log"; }

step environment
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; python --version
  python -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"; } >>"$log" 2>&1

step install
if compgen -G ".whl/*.whl" >/dev/null; then
    python -m pip install -q --no-index --no-deps --no-compile --target /tmp/mta-site .whl/*.whl >>"$log" 2>&1
    export PYTHONPATH="/tmp/mta-site${PYTHONPATH:+:$PYTHONPATH}"
fi
python -m pip install -q --no-deps --no-build-isolation -e . >>"$log" 2>&1 || step "install FAILED"
python -c "import minitorch_accum as m; from minitorch_accum import kernels; print('cuda', m.cuda_available(), 'cpu kernels', kernels.kernel_path())" >>"$log" 2>&1

step "GPU tests"
timeout 300 python -m pytest -q -m gpu -p no:cacheprovider tests >>"$log" 2>&1
echo "pytest exit $?" >>"$log"

step "kernel benchmark (CUDA)"
timeout 150 python -m minitorch_accum.bench.kernels --device cuda --out "$out" >>"$log" 2>&1
echo "kernels exit $?" >>"$log"

step "end-to-end benchmark (CUDA, quick)"
timeout 120 python -m minitorch_accum.bench.end_to_end --device cuda --quick --out "$out" >>"$log" 2>&1
echo "end_to_end exit $?" >>"$log"
step done
