#!/usr/bin/env bash
# Every check that only a GPU can make, in one call on a lent GPU machine, within 8 minutes:
#
#   bash bench/gpu/run_all.sh OUTDIR            # OUTDIR defaults to bench/results/gpu-run
#   bash bench/gpu/run_all.sh --plan            # print the phases and their budgets; run nothing
#   GPU_BENCH_WORKLOADS=lstm-lm GPU_BENCH_ARGS="--precision all" bash bench/gpu/run_all.sh "$OUT"
#
# Phases, in this order, each under `timeout` with its own budget (seconds; the variables override
# them), each logged; a phase that fails or times out is recorded and the next one runs:
#   env               BUDGET_ENV=15        GPU (nvidia-smi), Python, CuPy, NumPy, PyTorch... versions
#   gpu-tests         BUDGET_GPU_TESTS=90  pytest -m gpu GPU_TEST_PATHS (tests/gpu) -n 8 --timeout=45
#                                          --timeout-method=thread: a hung test costs one xdist
#                                          worker (killed and replaced), not the run. Without
#                                          pytest-xdist or pytest-timeout: plain pytest, stopped only
#                                          by the phase's limit (summary.md says so)
#   cupy-strict       BUDGET_CUPY_STRICT=25  pytest -m STRICT_MARK STRICT_TEST_PATHS (tests), same
#                                          options, only when pyproject.toml declares the cupy_strict
#                                          marker. STRICT_MARK is 'cupy_strict and not gpu': a test
#                                          marked gpu too runs on the GPU (tests/conftest.py), so the
#                                          gpu-tests phase has run it already; the others run on the
#                                          strict CuPy stand-in. "NO TESTS" (pytest's exit 5) is no
#                                          failure here
#   bench-WORKLOAD    BUDGET_BENCH=50 each   bench_gpu.py --workload W --rounds 1 (tf32 and bf16,
#                                          tinyflow vs PyTorch), each process killed after
#                                          CHILD_TIMEOUT=25 s (a hang costs one cell)
#   profile-WORKLOAD  BUDGET_PROFILE=40 each bench_gpu.py --profile --workload W --profile-steps 3:
#                                          per cell, the kernel table (ms/step, calls/step) and the
#                                          GPU-busy fraction, CUPTI through torch.profiler
#   graph-WORKLOAD    BUDGET_GRAPH=40 each   bench_gpu.py --cuda-graph --workload W --rounds 1: tinyflow's
#                                          step replayed as a CUDA graph vs PyTorch eager (issue 23);
#                                          for GPU_GRAPH_WORKLOADS, empty by default: the budgets above
#                                          fill the 455 s already (e.g. GPU_GRAPH_WORKLOADS=alexnet-64
#                                          GPU_BENCH_WORKLOADS="alexnet-64 lstm-lm" fits)
#   train             the time left, at most BUDGET_TRAIN=40 s, skipped under MIN_TRAIN=20 s: the
#                                          quickstart, `tinyflow train alexnet --device cuda:0`
# WORKLOAD: GPU_BENCH_WORKLOADS (alexnet-224 alexnet-64 lstm-lm); GPU_BENCH_ARGS go to bench_gpu.py
# (before --workload, after --rounds 1: "--rounds 2" overrides it).
#
# Time: the budgets (each plus the KILL_AFTER=5 s that `timeout` waits between its interrupt and
# its kill) add up to at most TOTAL_BUDGET=455 s, the deadline of the phases, counted from the
# start. A phase may also use the time the phases before it left unused, never the budgets of those
# after it, so the phases end by 455 s whatever hangs. The merges, summary and archive after them
# have limits too (STEP_LIMIT=4 s each, killed 1 s later: 21 s in all), so the script ends within
# 8 minutes (480 s) even when every phase hangs. `--plan` prints all of this and fails if it does
# not add up (tests/test_bench_gpu_scripts.py runs it).
#
# OUTDIR then holds 7 files (a lent machine returns at most 8):
#   summary.md                each phase: status (ok / FAILED / TIMEOUT / SKIPPED), exit code,
#                             seconds (limit), result: pytest's counts, ratios, GPU-busy figures;
#                             then the failed and timed-out tests
#   env.txt                   versions, the GPU ('gpu: NAME'), the commit
#   bench.json, bench.md      throughput, tinyflow vs PyTorch, every workload (bench_gpu.py)
#   profile.json, profile.md  per workload, precision and framework: wall and GPU-busy ms/step,
#                             busy fraction, kernels/step, the top kernels
#   logs.tar.gz               everything else: logs/<phase>.log, gpu-tests.xml (JUnit),
#                             bench-W.json/md, profile-W.json/md, profile/W-PRECISION-FRAMEWORK.txt
#                             (every kernel of a cell), phases.tsv
#
# The machine needs CuPy, PyTorch, pytest and hypothesis (the lent machines have them, and
# pytest-xdist and pytest-timeout) and no network: tinyflow is used from this checkout through
# PYTHONPATH (the root, which holds cuda_tools/ too: the strict CuPy stand-in and the emulator the
# cupy_strict tests run on, not part of the wheel), nothing is installed. Exit status: 0 when the gpu tests (and the cupy_strict tests,
# when they ran) passed, 1 otherwise; the benchmark's and profile's figures are reported whatever
# they are. See docs/cuda.md.
set -uo pipefail
plan_only=0
if [ "${1:-}" = "--plan" ]; then
    plan_only=1
    shift
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root" || exit 2
python="${PYTHON:-python3}"

: "${TOTAL_BUDGET:=455}" "${KILL_AFTER:=5}" "${STEP_LIMIT:=4}"  # STEP_LIMIT: each merge and summary
: "${BUDGET_ENV:=15}" "${BUDGET_GPU_TESTS:=90}" "${TEST_TIMEOUT:=45}" "${TEST_WORKERS:=8}"
: "${BUDGET_CUPY_STRICT:=25}" "${BUDGET_BENCH:=50}" "${BUDGET_PROFILE:=40}" "${CHILD_TIMEOUT:=25}"
: "${PROFILE_STEPS:=3}" "${BUDGET_TRAIN:=40}" "${MIN_TRAIN:=20}"
workloads="${GPU_BENCH_WORKLOADS-alexnet-224 alexnet-64 lstm-lm}"  # set and empty: no bench, no profile
graph_workloads="${GPU_GRAPH_WORKLOADS-}"  # --cuda-graph bench phases (none by default: see above)
: "${BUDGET_GRAPH:=40}"
strict=0
grep -q cupy_strict pyproject.toml 2>/dev/null && strict=1

# ---- the plan: every phase with a fixed budget, in order ------------------------------------
plan_names=() plan_budgets=()
plan() { plan_names+=("$1"); plan_budgets+=("$2"); }
plan env "$BUDGET_ENV"
plan gpu-tests "$BUDGET_GPU_TESTS"
[ "$strict" = 1 ] && plan cupy-strict "$BUDGET_CUPY_STRICT"
for w in $workloads; do plan "bench-$w" "$BUDGET_BENCH"; done
for w in $workloads; do plan "profile-$w" "$BUDGET_PROFILE"; done
for w in $graph_workloads; do plan "graph-$w" "$BUDGET_GRAPH"; done
planned=0
for b in "${plan_budgets[@]}"; do planned=$((planned + b + KILL_AFTER)); done
final_reserve=$((4 * (STEP_LIMIT + 1) + 1))  # 2 merges, the summary, the archive; each killed 1 s after

if [ "$plan_only" = 1 ]; then
    for i in "${!plan_names[@]}"; do echo "phase ${plan_names[$i]} budget ${plan_budgets[$i]}"; done
    echo "phase train leftover $BUDGET_TRAIN"
    echo "kill_after $KILL_AFTER"
    echo "total $planned of $TOTAL_BUDGET"
    echo "final_reserve $final_reserve"
    [ "$planned" -le "$TOTAL_BUDGET" ] && [ $((TOTAL_BUDGET + final_reserve)) -lt 480 ]
    exit
fi

out="${1:-$root/bench/results/gpu-run}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
logs="$out/logs"
rm -rf "$logs"
rm -f "$out"/{summary.md,env.txt,bench.json,bench.md,profile.json,profile.md,logs.tar.gz}
mkdir -p "$logs"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"  # tinyflow, tinyflow_cuda and cuda_tools
export PYTHONUNBUFFERED=1
deadline=$TOTAL_BUDGET  # in bash's SECONDS since the start
: >"$logs/phases.tsv"
if [ "$planned" -gt "$TOTAL_BUDGET" ]; then
    echo "warning: the budgets add up to ${planned}s, over TOTAL_BUDGET=${TOTAL_BUDGET}s: the last phases get less"
fi
title="$(date -u +%Y-%m-%d) $(git rev-parse --short HEAD 2>/dev/null || echo 'no git')"

render() {  # summary.md from phases.tsv, after every phase (so a stopped run still has one)
    timeout -k 1 "$STEP_LIMIT" "$python" bench/gpu/run_summary.py --phases "$logs/phases.tsv" --env "$out/env.txt" \
        --out "$out/summary.md" --title "$title" --budget "$TOTAL_BUDGET" >>"$logs/summary-errors.log" 2>&1 ||
        { echo "run_summary.py failed (logs/summary-errors.log); the phases:"; cat "$logs/phases.tsv"; } >"$out/summary.md"
}

reserved_after() {  # seconds the phases planned after $1 are guaranteed (their budgets + kill_after)
    local i found=0 sum=0
    for i in "${!plan_names[@]}"; do
        if [ "$found" = 1 ]; then sum=$((sum + plan_budgets[i] + KILL_AFTER)); fi
        [ "${plan_names[$i]}" = "$1" ] && found=1
    done
    echo "$sum"
}

budget_of() {
    local i
    for i in "${!plan_names[@]}"; do [ "${plan_names[$i]}" = "$1" ] && echo "${plan_budgets[$i]}"; done
}

phase() {  # phase NAME KIND LOG RESULT_JSON NOTE LIMIT command...  (LIMIT: seconds, or "plan")
    local name=$1 kind=$2 log=$3 result=$4 note=$5 limit=$6 budget status
    shift 6
    if [ "$limit" = plan ]; then  # its budget plus the unused time before it, less what later phases need
        budget=$(budget_of "$name")
        limit=$((deadline - SECONDS - KILL_AFTER - $(reserved_after "$name")))
    else
        budget=$limit
        limit=$((limit < deadline - SECONDS - KILL_AFTER ? limit : deadline - SECONDS - KILL_AFTER))
    fi
    if [ "$limit" -lt 5 ]; then
        printf '%s\t%s\tSKIPPED\t\t0\t%s\t%s\t\tno time left (budget %ss)\n' "$name" "$kind" "$budget" "$log" "$budget" >>"$logs/phases.tsv"
        echo "== $name: SKIPPED, no time left"
        render
        return 125
    fi
    local cmdline="$*"
    cmdline="${cmdline//$'\n'/ }"
    echo "== $name (limit ${limit}s, at +${SECONDS}s): ${cmdline:0:400}" | tee "$log"
    local start=$SECONDS rc
    timeout --signal=INT --kill-after="$KILL_AFTER" "$limit" "$@" >>"$log" 2>&1 </dev/null
    rc=$?
    local took=$((SECONDS - start))
    case $rc in
        0) status=ok ;;
        124|137) status=TIMEOUT ;;
        5) if [ "$kind" = pytest ]; then status="NO TESTS"; else status=FAILED; fi ;;
        *) status=FAILED ;;
    esac
    echo "== $name: $status (exit $rc, ${took}s of ${limit}s)" | tee -a "$log"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$kind" "$status" "$rc" "$took" "$limit" "$log" "$result" "$note" >>"$logs/phases.tsv"
    render
    return "$rc"
}

# ---- 1. env ---------------------------------------------------------------------------------
phase env cmd "$out/env.txt" "" "" plan bash -c "
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
    echo commit \$(git rev-parse HEAD 2>/dev/null || echo 'no git'), \$(git status --short 2>/dev/null | wc -l) changed files
    $python - <<'PY'
import platform, numpy
print('python', platform.python_version(), 'numpy', numpy.__version__)
for name in ('cupy', 'torch', 'ml_dtypes', 'mpi4py', 'hypothesis', 'pytest', 'xdist', 'pytest_timeout'):
    try:
        module = __import__(name)
        print(name, getattr(module, '__version__', '?'))
    except Exception as exc:
        print(name, 'MISSING', type(exc).__name__, exc)
try:
    import torch
    print('gpu:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none (torch sees no CUDA device)')
except Exception as exc:
    print('gpu: unknown', type(exc).__name__, exc)
import tinyflow_cuda
print('tinyflow_cuda.is_available', tinyflow_cuda.is_available(), tinyflow_cuda.unavailable_reason() or '')
PY"

# ---- 2. the gpu tests (and cupy_strict) under pytest-xdist with a per-test timeout -----------
pytest_help="$(timeout -k 1 20 "$python" -m pytest --help -p no:cacheprovider 2>/dev/null)"
if grep -q -- "--timeout-method" <<<"$pytest_help" && grep -q -- "--numprocesses" <<<"$pytest_help"; then
    parallel=(-n "$TEST_WORKERS" --timeout="$TEST_TIMEOUT" --timeout-method=thread)
    test_note="pytest-xdist -n $TEST_WORKERS, --timeout=$TEST_TIMEOUT --timeout-method=thread"
else
    parallel=()
    test_note="plain pytest: pytest-xdist or pytest-timeout missing here, so a hang stops the whole phase (its limit only)"
fi
pytest_run=("$python" -m pytest -q -rfE --tb=short -p no:cacheprovider --durations=15 ${parallel[@]+"${parallel[@]}"})

# shellcheck disable=SC2086  # the paths are lists
phase gpu-tests pytest "$logs/gpu-tests.log" "" "$test_note" plan \
    "${pytest_run[@]}" -m gpu ${GPU_TEST_PATHS:-tests/gpu} --junitxml="$logs/gpu-tests.xml"
tests_rc=$?
if [ "$strict" = 1 ]; then
    # shellcheck disable=SC2086
    phase cupy-strict pytest "$logs/cupy-strict.log" "" "-m '${STRICT_MARK:-cupy_strict and not gpu}'; $test_note" plan \
        "${pytest_run[@]}" -m "${STRICT_MARK:-cupy_strict and not gpu}" ${STRICT_TEST_PATHS:-tests} \
        --junitxml="$logs/cupy-strict.xml"
    strict_rc=$?
    if [ "$tests_rc" -eq 0 ] && [ "$strict_rc" -ne 5 ]; then tests_rc=$strict_rc; fi
fi

# ---- 3. throughput, one workload per phase ---------------------------------------------------
for w in $workloads; do
    # shellcheck disable=SC2086  # GPU_BENCH_ARGS is a list of options
    phase "bench-$w" bench "$logs/bench-$w.log" "$logs/bench-$w.json" "" plan \
        "$python" bench/gpu/bench_gpu.py --rounds 1 --child-timeout "$CHILD_TIMEOUT" ${GPU_BENCH_ARGS:-} \
        --workload "$w" --json "$logs/bench-$w.json" --markdown "$logs/bench-$w.md"
done

# ---- 4. where the time goes: kernel tables, one workload per phase ---------------------------
for w in $workloads; do
    # shellcheck disable=SC2086
    phase "profile-$w" profile "$logs/profile-$w.log" "$logs/profile-$w.json" "" plan \
        "$python" bench/gpu/bench_gpu.py --profile --profile-steps "$PROFILE_STEPS" \
        --child-timeout "$CHILD_TIMEOUT" ${GPU_BENCH_ARGS:-} --workload "$w" \
        --json "$logs/profile-$w.json" --markdown "$logs/profile-$w.md" --profile-dir "$logs/profile"
done

# ---- 4b. throughput with tinyflow's step as a CUDA graph (GPU_GRAPH_WORKLOADS) -----------------
for w in $graph_workloads; do
    # shellcheck disable=SC2086
    phase "graph-$w" bench "$logs/graph-$w.log" "$logs/graph-$w.json" "" plan \
        "$python" bench/gpu/bench_gpu.py --cuda-graph --rounds 1 --child-timeout "$CHILD_TIMEOUT" ${GPU_BENCH_ARGS:-} \
        --workload "$w" --json "$logs/graph-$w.json" --markdown "$logs/graph-$w.md"
done

# ---- 5. the quickstart on the GPU, in the time left -------------------------------------------
left=$((deadline - SECONDS - KILL_AFTER))
if [ "$BUDGET_TRAIN" -gt 0 ] && [ "$left" -ge "$MIN_TRAIN" ]; then
    phase train cmd "$logs/train.log" "" "" "$BUDGET_TRAIN" \
        "$python" -m tinyflow.cli train alexnet --device cuda:0 --checkpoint-dir "${TMPDIR:-/tmp}/tinyflow-gpu-train"
else
    printf 'train\tcmd\tSKIPPED\t\t0\t%s\t\t\tonly %ss left (needs %ss) or BUDGET_TRAIN=0\n' "$BUDGET_TRAIN" "$left" "$MIN_TRAIN" >>"$logs/phases.tsv"
fi

# ---- the files: merged tables, summary, one archive of the rest ------------------------------
bench_files=() profile_files=()
for w in $workloads; do
    bench_files+=("$logs/bench-$w.json")
    profile_files+=("$logs/profile-$w.json")
done
for w in $graph_workloads; do bench_files+=("$logs/graph-$w.json"); done
if [ "${#bench_files[@]}" -gt 0 ]; then  # missing files are skipped: the tables hold what finished
    timeout -k 1 "$STEP_LIMIT" "$python" bench/gpu/bench_gpu.py --merge "${bench_files[@]}" \
        --json "$out/bench.json" --markdown "$out/bench.md" >>"$logs/merge.log" 2>&1
    timeout -k 1 "$STEP_LIMIT" "$python" bench/gpu/bench_gpu.py --profile --merge "${profile_files[@]}" \
        --json "$out/profile.json" --markdown "$out/profile.md" >>"$logs/merge.log" 2>&1
fi
render
timeout -k 1 "$STEP_LIMIT" tar -czf "$out/logs.tar.gz" -C "$out" logs && rm -rf "$logs"

echo
echo "== summary ($out/summary.md), finished at +${SECONDS}s; files:"
ls -l "$out"
echo
cat "$out/summary.md"
[ "$tests_rc" -eq 0 ]
