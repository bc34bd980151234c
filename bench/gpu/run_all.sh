#!/usr/bin/env bash
# Every check that only a GPU can make, in one call on a lent GPU machine, within 10 minutes:
#
#   bash bench/gpu/run_all.sh OUTDIR            # OUTDIR defaults to bench/results/gpu-run
#   GPU_BENCH_ARGS="--workload lstm-lm" bash bench/gpu/run_all.sh "$OUT"
#
# Steps (each under its own time limit, each logged; a failing step does not stop the next):
#   1. env.txt          the GPU (nvidia-smi), Python, CuPy, NumPy, PyTorch, ml_dtypes versions
#   2. gpu-tests.log    pytest -m gpu over the whole tests/ tree (kernels vs NumPy, ops cuda vs cpu,
#      gpu-tests.xml    AlexNet-64/2012 and LSTM LM steps vs CPU, NVRTC compiling every module,
#                       thread ranks on streams, memory statistics, autocast); JUnit XML beside it
#   3. bench.log        bench/gpu/bench_gpu.py: AlexNet-224, AlexNet-64, LSTM LM vs PyTorch
#      bench.json       (fp32 with TF32 and bf16), images/s or tokens/s, ratio, peak memory
#      bench.md
#   4. train.log        `tinyflow train alexnet --device cuda:0`, the quickstart job on the GPU
#   5. summary.txt      one line per step: ok / FAILED (exit code) / TIMEOUT, and the test counts
#
# The machine needs CuPy, PyTorch, pytest and hypothesis (the lent machines have them) and no
# network: tinyflow is used from this checkout through PYTHONPATH, nothing is installed.
# Exit status: 0 when the gpu tests passed, 1 otherwise (the benchmark's figures are reported
# whatever they are). See docs/cuda.md.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-$root/bench/results/gpu-run}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$root" || exit 2
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
python="${PYTHON:-python3}"
summary="$out/summary.txt"
: >"$summary"

step() {  # step NAME SECONDS LOG command...  -> runs it under timeout, tees LOG, records status
    local name=$1 limit=$2 log=$3
    shift 3
    echo "== $name (limit ${limit}s): $*" | tee "$log"
    local start=$SECONDS
    timeout --signal=INT --kill-after=20 "$limit" "$@" 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    local took=$((SECONDS - start))
    case $rc in
        0) echo "$name: ok (${took}s)" >>"$summary" ;;
        124|137) echo "$name: TIMEOUT after ${took}s" >>"$summary" ;;
        *) echo "$name: FAILED (exit $rc, ${took}s)" >>"$summary" ;;
    esac
    return "$rc"
}

step env 60 "$out/env.txt" bash -c "
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    $python - <<'PY'
import platform, numpy
print('python', platform.python_version(), 'numpy', numpy.__version__)
for name in ('cupy', 'torch', 'ml_dtypes', 'mpi4py', 'hypothesis', 'pytest'):
    try:
        module = __import__(name)
        print(name, getattr(module, '__version__', '?'))
    except Exception as exc:
        print(name, 'MISSING', type(exc).__name__, exc)
import tinyflow_cuda
print('tinyflow_cuda.is_available', tinyflow_cuda.is_available(), tinyflow_cuda.unavailable_reason() or '')
PY"

step gpu-tests 200 "$out/gpu-tests.log" "$python" -m pytest -m gpu tests -q -rfE \
    -p no:cacheprovider --junitxml="$out/gpu-tests.xml"
tests_rc=$?
grep -E "^(FAILED|ERROR)|[0-9]+ (passed|failed)" "$out/gpu-tests.log" | tail -n 40 >>"$summary"

# shellcheck disable=SC2086  # GPU_BENCH_ARGS is a list of options
step bench 260 "$out/bench.log" "$python" bench/gpu/bench_gpu.py --json "$out/bench.json" \
    --markdown "$out/bench.md" ${GPU_BENCH_ARGS:-}
grep -E "ratio|error|failed" "$out/bench.log" >>"$summary"

step train 110 "$out/train.log" "$python" -m tinyflow.cli train alexnet --device cuda:0 \
    --checkpoint-dir "${TMPDIR:-/tmp}/tinyflow-gpu-train"
grep -E "images/s|top-1|val" "$out/train.log" | tail -n 5 >>"$summary"

echo
echo "== summary ($out/summary.txt)"
cat "$summary"
[ "$tests_rc" -eq 0 ]
