"""What holds for every .cu family: each kernel is launched by its family's twin, and each twin
module mirrors its reference. The kernels themselves are tested family by family, in
tests/gpu/test_cuda_kernels_<family>.py, each against the NumPy reference kernel of the same name
in tinyflow/kernels/, on the emulator and (marked gpu) on a GPU (tests/gpu/kernel_backend.py).
"""
from __future__ import annotations

import inspect

import pytest

import tinyflow.kernels as ref
import tinyflow_cuda.kernels as cuk
from tinyflow_cuda import runtime


def test_every_kernel_in_the_sources_is_exercised_by_a_wrapper():
    """Each extern "C" kernel is launched by the twin module of its own family (no dead .cu code,
    and csrc/<family>.cu pairs with tinyflow_cuda/kernels/<family>.py)."""
    for name, info in runtime.discover().items():
        base = name.rsplit("_", 1)[0]  # the symbol without its dtype suffix
        family = getattr(cuk, info.source.stem, None)
        assert family is not None, f"{info.source.name} has no twin module tinyflow_cuda/kernels/{info.source.stem}.py"
        assert f'"{base}"' in inspect.getsource(family), \
            f"kernel {name} of {info.source.name} is launched by no twin in {family.__name__}"


@pytest.mark.parametrize("family", ref.FAMILIES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_twin_module_mirrors_its_reference_family(family):
    """tinyflow_cuda/kernels/<family>.py defines every kernel of tinyflow/kernels/<family>.py,
    with the same parameter names in the same order, and nothing else."""
    short = family.__name__.rsplit(".", 1)[1]
    twin = getattr(cuk, short)
    assert twin.__name__ == f"tinyflow_cuda.kernels.{short}"
    assert sorted(twin.__all__) == sorted(family.__all__), f"{short}: twin names differ from the reference's"
    for name in family.__all__:
        want = list(inspect.signature(getattr(family, name)).parameters)
        got = list(inspect.signature(getattr(twin, name)).parameters)
        assert got == want, f"{short}.{name}: twin parameters {got} != reference {want}"
    assert [m.__name__.rsplit(".", 1)[1] for m in cuk.FAMILIES] == [m.__name__.rsplit(".", 1)[1] for m in ref.FAMILIES]


def test_every_kernel_has_fp32_fp64_fp16_and_bf16_entry_points():
    """docs/design.md ("The rules"): each .cu family has all four entry points, so no op falls back
    to a per-tap reference on a GPU for want of a half-precision kernel (issue 21)."""
    suffixes = ("f32", "f64", "f16", "bf16")
    bases: dict[str, set[str]] = {}
    for name in runtime.discover():
        base, _, suffix = name.rpartition("_")
        assert suffix in suffixes, f"kernel {name} has no dtype suffix"
        bases.setdefault(base, set()).add(suffix)
    missing = {base: sorted(set(suffixes) - have) for base, have in bases.items() if have != set(suffixes)}
    assert not missing, f"kernels without every dtype: {missing}"
    assert len(bases) >= 40  # every family's kernels were found
