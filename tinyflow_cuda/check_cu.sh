#!/usr/bin/env bash
# Compile-check every CUDA source of tinyflow_cuda with nvcc (CI runs this where nvcc exists).
#
#   tinyflow_cuda/check_cu.sh            # uses nvcc from PATH, sm_90
#   NVCC=/opt/cuda/bin/nvcc ARCH=sm_80 tinyflow_cuda/check_cu.sh
#
# At run time the same files are compiled by NVRTC through cupy.RawModule; nvcc catches the
# syntax, type and template errors first, without a GPU. Exits non-zero if any file fails.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
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
        echo "ok      ${file#"$here"/}"
    else
        echo "FAILED  ${file#"$here"/}" >&2
        status=1
    fi
done < <(find "$here" -name '*.cu' -print0 | sort -z)
if [ "$count" -eq 0 ]; then
    echo "check_cu.sh: no .cu files under $here" >&2
    exit 2
fi
echo "$count file(s) checked with $("$nvcc" --version | tail -n 2 | head -n 1)"
exit $status
