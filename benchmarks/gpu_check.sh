#!/usr/bin/env bash
# The one script to run on a GPU machine that has no network (CuPy, numpy, pybind11,
# pytest, hypothesis and torch are already installed there): install the package,
# run the GPU tests and both benchmarks at GPU sizes, and write everything into the
# folder named by the first argument, in well under 10 minutes.
#
#   bash benchmarks/gpu_check.sh "$OUT"
#
# Pure-Python dependencies missing on that image (ml_dtypes, scipy, safetensors, rich,
# scikit-learn, matplotlib) can travel as wheels in .whl/ (see benchmarks/README.md).
# Writes gpu_check.log, gpu_check.json (each step's exit status) and, per benchmark,
# two JSON and a PNG: 8 files at most.
set -uo pipefail
out=$(realpath -m "${1:?usage: bash benchmarks/gpu_check.sh OUT_DIR}")
mkdir -p "$out"
cd "$(dirname "$0")/.."
log="$out/gpu_check.log"
export PYTHONUNBUFFERED=1 MTA_HYPOTHESIS_PROFILE=ci
statuses="" all_passed=true

# step NAME SECONDS COMMAND...: run it into the log, note its exit status for gpu_check.json
step() {
    local name=$1 limit=$2
    shift 2
    echo "=== $name ($(date -u +%H:%M:%S))" | tee -a "$log"
    timeout "$limit" bash -c '"$@"' "$name" "$@" >>"$log" 2>&1  # bash -c: a step may be a function
    local status=$?
    echo "$name exit $status" | tee -a "$log"
    statuses+="${statuses:+, }\"$name\": $status"
    [ "$status" -eq 0 ] || all_passed=false
}

environment() {
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv && python --version &&
        python -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)"
}

install() {
    if compgen -G ".whl/*.whl" >/dev/null; then
        python -m pip install -q --no-index --no-deps --no-compile --target /tmp/mta-site .whl/*.whl || return
    fi
    python -m pip install -q --no-deps --no-build-isolation -e . &&
        python -c "import minitorch_accum as m; from minitorch_accum import kernels; print('cuda', m.cuda_available(), 'cpu kernels', kernels.kernel_path())"
}

export -f environment install
export PYTHONPATH="/tmp/mta-site${PYTHONPATH:+:$PYTHONPATH}"  # the wheels from .whl/, if any
step environment 60 environment
step install 240 install
step gpu_tests 300 python -m pytest -q -m gpu -p no:cacheprovider tests
step kernels 150 python benchmarks/kernels.py --device cuda --out "$out"
step end_to_end 120 python benchmarks/end_to_end.py --device cuda --quick --out "$out"
printf '{"exit_status": {%s}, "all_passed": %s}\n' "$statuses" "$all_passed" >"$out/gpu_check.json"
echo "=== done: $out/gpu_check.json" | tee -a "$log"
