#!/usr/bin/env bash
# Compile-check every CUDA source of tinyflow_cuda (tinyflow_cuda/csrc/*.cu) with nvcc, then lint
# their PTX (CI runs this where nvcc exists; it is test machinery, not installed with the wheel).
#
#   cuda_tools/check_cu.sh                 # uses nvcc from PATH, sm_90
#   NVCC=/opt/cuda/bin/nvcc ARCH=sm_80 cuda_tools/check_cu.sh
#   cuda_tools/check_cu.sh --allow-stale   # arguments go to the lint (ptx_lint.py --help)
#   PTX_LINT=0 cuda_tools/check_cu.sh      # the compile check alone
#
# At run time the same files are compiled by NVRTC through cupy.RawModule; nvcc catches the
# syntax, type and template errors first, without a GPU. Then cuda_tools/ptx_lint.py (standard
# library only; $PYTHON, else the first of python3, python3.11, python) flags integer division by a runtime value and 64-bit
# index math inside loops, and register spills, unless the kernel is listed with its reason in
# cuda_tools/check_cu_allow.txt; it runs only when every file compiled.
# Exit status: 0 clean; 1 a file failed to compile or the lint failed (new finding, stale or
# malformed allowlist entry); 2 nvcc, ptxas or python missing, or no .cu files.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
csrc="$root/tinyflow_cuda/csrc"
nvcc="${NVCC:-nvcc}"
arch="${ARCH:-sm_90}"
if ! command -v "$nvcc" >/dev/null 2>&1; then
    echo "check_cu.sh: $nvcc not found; set NVCC or put nvcc on PATH" >&2
    exit 2
fi
status=0
count=0
while IFS= read -r -d '' file; do
    count=$((count + 1))
    if "$nvcc" -std=c++17 -arch="$arch" -c "$file" -o /dev/null; then
        echo "ok      ${file#"$root"/}"
    else
        echo "FAILED  ${file#"$root"/}" >&2
        status=1
    fi
done < <(find "$csrc" -name '*.cu' -print0 | sort -z)
if [ "$count" -eq 0 ]; then
    echo "check_cu.sh: no .cu files under $csrc" >&2
    exit 2
fi
echo "$count file(s) checked with $("$nvcc" --version | tail -n 2 | head -n 1)"
if [ "$status" -ne 0 ]; then
    echo "check_cu.sh: PTX lint skipped: fix the compile errors first" >&2
    exit $status
fi
if [ "${PTX_LINT:-1}" = "0" ]; then
    echo "check_cu.sh: PTX lint skipped (PTX_LINT=0)"
    exit 0
fi
python="${PYTHON:-}"
if [ -z "$python" ]; then
    for candidate in python3 python3.11 python; do
        if command -v "$candidate" >/dev/null 2>&1; then python="$candidate"; break; fi
    done
fi
if [ -z "$python" ] || ! command -v "$python" >/dev/null 2>&1; then
    echo "check_cu.sh: no python for the PTX lint (${PYTHON:-python3}); set PYTHON or put python3 on PATH" >&2
    exit 2
fi
NVCC="$nvcc" ARCH="$arch" "$python" "$here/ptx_lint.py" "$@"
exit $?
