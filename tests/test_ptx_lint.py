"""The PTX lint (cuda_tools/ptx_lint.py): each rule fires on a kernel that has the cost and
stays quiet on its fixed twin, compiled with the real nvcc; the allowlist suppresses, rejects
entries without a reason and reports stale ones. Skipped where nvcc is missing."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cuda_tools import ptx_lint

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

# One .cu with every synthetic kernel: compiled once (about 2 s), then judged kernel by kernel.
SYNTHETIC = r"""
extern "C" {
// per-element division by a runtime int inside a grid-stride loop
__global__ void div_in_loop(const float* x, float* y, int n, int w) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = x[i / w] + (float)(i % w);
}
// the same with the division hoisted: once per thread, then (row, col) advance by adds
__global__ void div_hoisted(const float* x, float* y, int n, int w) {
    const int first = blockIdx.x * blockDim.x + threadIdx.x, stride = blockDim.x * gridDim.x;
    int row = first / w, col = first % w;
    const int drow = stride / w, dcol = stride % w;
    for (int i = first; i < n; i += stride) {
        y[i] = x[row] + (float)col;
        row += drow;
        col += dcol;
        if (col >= w) { col -= w; ++row; }
    }
}
// the same with an immediate divisor (nvcc multiplies by a magic number)
__global__ void div_immediate(const float* x, float* y, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = x[i / 7] + (float)(i % 7);
}
// a 64-bit division (nvcc guards it with a 32-bit fast path: both are flagged)
__global__ void div64_in_loop(const float* x, float* y, long long n, long long w) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        y[i] = x[i / w];
}
// a division hidden in a function that is not inlined, called per element
__device__ __noinline__ int divide(int a, int b) { return a / b; }
__global__ void div_by_call(const float* x, float* y, int n, int w) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        y[i] = x[divide(i, w)];
}
// a transposing copy with 64-bit index math per element, and its 32-bit twin
__global__ void index64_loop(const float* x, float* y, int rows, int cols, long long ld) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x)
        for (long long c = threadIdx.x; c < cols; c += blockDim.x)
            y[(long long)r * cols + c] = x[c * ld + r];
}
__global__ void index32_loop(const float* x, float* y, int rows, int cols, int ld) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x)
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            y[r * cols + c] = x[c * ld + r];
}
// 64-bit products that never form an address (a hash): not index math
__global__ void hash64(unsigned int* y, unsigned long long seed, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        unsigned long long z = (seed + i) * 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ULL;
        y[i] = (unsigned int)(z >> 32);
    }
}
// a huge register array under tight launch bounds (at most 32 registers a thread): spills
__global__ void __launch_bounds__(1024, 2) spills(const float* x, float* y, int n) {
    float acc[96];
#pragma unroll
    for (int k = 0; k < 96; ++k) acc[k] = x[k * n + threadIdx.x];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int k = 0; k < 96; ++k) acc[k] = acc[k] * acc[(k * 7 + r + 1) % 96] + x[r];
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < 96; ++k) s += acc[k] * (float)(k + 1);
    y[threadIdx.x] = s;
}
// the same work with few live values: no spill
__global__ void __launch_bounds__(1024, 2) no_spills(const float* x, float* y, int n) {
    float s = 0.f;
    for (int k = 0; k < 96; ++k) s += x[k * n + threadIdx.x] * (float)(k + 1);
    y[threadIdx.x] = s;
}
}
"""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ptx_lint.FileResult]:
    path = tmp_path_factory.mktemp("ptx_lint") / "synthetic.cu"
    path.write_text(SYNTHETIC)
    result = ptx_lint.lint_file(path, ptx_lint.find_tools())
    assert not result.error, result.error
    return path, result


def rules_of(result: ptx_lint.FileResult, kernel: str) -> set[str]:
    assert kernel in result.kernels, f"{kernel} not compiled: {result.kernels}"
    return {f.rule for f in result.findings if f.kernel == kernel}


@pytest.mark.parametrize(
    "kernel, expected",
    [
        ("div_in_loop", {"runtime-div"}),
        ("div_hoisted", set()),
        ("div_immediate", set()),
        ("div64_in_loop", {"runtime-div"}),
        ("div_by_call", {"runtime-div"}),
        ("index64_loop", {"index64"}),
        ("index32_loop", set()),
        ("hash64", set()),
        ("spills", {"spill"}),
        ("no_spills", set()),
    ],
)
def test_each_rule_fires_on_its_cost_and_not_on_the_fixed_twin(synthetic, kernel, expected):
    _, result = synthetic
    assert rules_of(result, kernel) == expected


def test_findings_say_what_and_where(synthetic):
    _, result = synthetic
    by_key = {(f.kernel, f.rule): f for f in result.findings}
    div = by_key["div_in_loop", "runtime-div"]
    assert div.line().startswith("div_in_loop: runtime-div: ")
    assert "div.s32" in div.detail and "synthetic.cu:" in div.detail  # the source line, -lineinfo
    assert "div.s64" in by_key["div64_in_loop", "runtime-div"].detail
    assert "divide" in by_key["div_by_call", "runtime-div"].detail
    assert "mul.lo.s64" in by_key["index64_loop", "index64"].detail
    assert "bytes spill stores" in by_key["spills", "spill"].detail


def test_loops_are_natural_loops_of_back_edges():
    # entry -> A; A -> B; B -> A (back edge); B -> C (exit): A and B loop, entry and C do not.
    ptx = """
    .visible .entry k(.param .u32 n)
    {
        mov.u32 %r1, 0;
    $A:
        add.s32 %r1, %r1, 1;
    $B:
        setp.lt.s32 %p1, %r1, 10;
        @%p1 bra $A;
        ret;
    }
    """
    (fn,) = ptx_lint.parse_ptx(ptx)
    labels = [b.label for b in fn.blocks]
    assert labels == [None, "$A", "$B", None]
    inside = {labels[i] for i in ptx_lint.loop_blocks(fn.blocks)}
    assert inside == {"$A", "$B"}


def test_a_forward_branch_to_an_earlier_label_in_the_text_is_no_loop():
    # Laid out out of order but acyclic: entry -> $late -> $early -> exit, no cycle.
    ptx = """
    .visible .entry k(.param .u32 n)
    {
        div.u32 %r3, %r1, %r2;
        bra.uni $late;
    $early:
        div.u32 %r4, %r1, %r2;
        ret;
    $late:
        div.u32 %r5, %r1, %r2;
        bra.uni $early;
    }
    """
    (fn,) = ptx_lint.parse_ptx(ptx)
    assert ptx_lint.loop_blocks(fn.blocks) == set()
    assert ptx_lint.lint_functions([fn]) == []


ALL_RULES_OF_SYNTHETIC = [
    ("div_in_loop", "runtime-div"),
    ("div64_in_loop", "runtime-div"),
    ("div_by_call", "runtime-div"),
    ("index64_loop", "index64"),
    ("spills", "spill"),
]


def test_the_allowlist_suppresses_listed_findings_and_reports_stale_entries(synthetic):
    _, result = synthetic
    text = "\n".join(f"{k}  {r}  synthetic: the test lists it" for k, r in ALL_RULES_OF_SYNTHETIC[1:])
    text += "\nindex32_loop  index64  fixed long ago\n"
    verdict = ptx_lint.apply_allowlist(result.findings, ptx_lint.parse_allowlist(text))
    assert [(f.kernel, f.rule) for f in verdict.new] == [("div_in_loop", "runtime-div")]
    assert len(verdict.allowed) == 4
    assert [(e.kernel, e.rule, e.line) for e in verdict.stale] == [("index32_loop", "index64", 5)]


@pytest.mark.parametrize(
    "line, message",
    [
        ("div_in_loop  runtime-div", "needs a reason"),
        ("div_in_loop  runtime-div   ", "needs a reason"),
        ("div_in_loop  runtime-div  TODO say why", "needs a reason"),
        ("div_in_loop", "needs a reason"),
        ("div_in_loop  division  per row only", "unknown rule 'division'"),
        ("div_*_loop  runtime-div  a reason", "must be a name or name_*"),
    ],
)
def test_an_entry_without_a_reason_or_with_a_bad_field_is_an_error(line, message):
    with pytest.raises(ptx_lint.AllowlistError, match=message) as info:
        ptx_lint.parse_allowlist(f"# comment\n\n{line}\n", "allow.txt")
    assert "allow.txt:3" in str(info.value)


def test_a_duplicate_entry_is_an_error():
    with pytest.raises(ptx_lint.AllowlistError, match="listed already at line 1"):
        ptx_lint.parse_allowlist("k_f32 spill why\nk_f32 spill why again\n")


def test_name_star_covers_the_dtype_variants_only():
    (entry,) = ptx_lint.parse_allowlist("conv_output_*  index64  why # not a comment\n")
    assert entry.reason == "why # not a comment"

    def hit(kernel: str) -> bool:
        return entry.matches(ptx_lint.Finding(kernel, "index64", ""))

    assert all(hit(f"conv_output_{s}") for s in ("f32", "f64", "f16", "bf16"))
    assert not hit("conv_output_grad_f32") and not hit("conv_output") and not hit("conv_output_x")
    assert not entry.matches(ptx_lint.Finding("conv_output_f32", "spill", ""))


def test_suggest_allowlist_keeps_reasons_groups_dtypes_and_marks_new_entries_todo(tmp_path):
    findings = [ptx_lint.Finding(f"k_{s}", "index64", "d", "a.cu") for s in ("f32", "f64")]
    findings += [ptx_lint.Finding("k_f32", "runtime-div", "d", "a.cu")]
    result = ptx_lint.FileResult(tmp_path / "a.cu", ["k_f32", "k_f64"], findings)
    kept = ptx_lint.parse_allowlist("k_*  index64  rows need 64 bits\n")
    text = ptx_lint.suggest_allowlist([result], kept)
    lines = [line.split(None, 2) for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == [["k_*", "index64", "rows need 64 bits"], ["k_f32", "runtime-div", "TODO say why, or fix: d"]]
    with pytest.raises(ptx_lint.AllowlistError, match="needs a reason"):
        ptx_lint.parse_allowlist(text)  # the TODO must be replaced before it is committed


def test_main_fails_on_a_new_finding_and_passes_once_listed(synthetic, tmp_path, capsys, monkeypatch):
    path, result = synthetic
    allow = tmp_path / "allow.txt"
    allow.write_text("".join(f"{k}  {r}  listed by the test\n" for k, r in ALL_RULES_OF_SYNTHETIC[1:]))
    assert ptx_lint.main([str(path), "--allowlist", str(allow)]) == 1  # compiles, end to end
    err = capsys.readouterr().err
    assert "FAIL    div_in_loop: runtime-div: " in err
    assert "div_in_loop  runtime-div  <why>" in err  # how to list it

    monkeypatch.setattr(ptx_lint, "lint_files", lambda paths, tools, jobs=None: [result])  # no recompiles

    allow.write_text(allow.read_text() + "div_in_loop  runtime-div  listed too\nhash64  index64  stale\n")
    assert ptx_lint.main([str(path), "--allowlist", str(allow)]) == 1
    assert "'hash64  index64' no longer fires" in capsys.readouterr().err
    assert ptx_lint.main([str(path), "--allowlist", str(allow), "--allow-stale"]) == 0
    out = capsys.readouterr()
    assert "5 allowed" in out.out and "warning" in out.err

    allow.write_text("div_in_loop  runtime-div\n")
    assert ptx_lint.main([str(path), "--allowlist", str(allow)]) == 1
    assert "needs a reason" in capsys.readouterr().err


def test_a_file_that_does_not_compile_fails_the_lint(tmp_path, capsys):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(float* y) { y[0] = undeclared; }\n')
    assert ptx_lint.main([str(bad), "--allowlist", str(tmp_path / "none.txt")]) == 1
    assert "nvcc -ptx failed" in capsys.readouterr().err


@pytest.mark.slow  # compiles every csrc/*.cu: a minute on a busy 2-core machine
def test_the_real_kernels_pass_with_the_committed_allowlist(capsys):
    """Goes red when a kernel gains a finding or an allowlist entry goes stale: rerun
    ``python -m cuda_tools.ptx_lint --suggest-allowlist`` and fix the kernel or the list."""
    status = ptx_lint.main([])
    captured = capsys.readouterr()
    assert status == 0, captured.err + captured.out
