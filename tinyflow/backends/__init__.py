"""``tinyflow.backends``: the switches PyTorch programs set on ``torch.backends``.

``torch.backends.cudnn.benchmark = True`` and friends are accepted and remembered but change
nothing: tinyflow has no cuDNN (its convolutions are its own kernels). ``mps`` is never
available; ``cuda.is_built()`` says whether tinyflow's CUDA backend can run here.
"""
from __future__ import annotations

from types import SimpleNamespace

from tinyflow.backends import cudnn, mps  # noqa: F401

__all__ = ["cudnn", "mps", "cuda", "mkldnn", "openmp", "opt_einsum"]


class _Cuda(SimpleNamespace):
    """``torch.backends.cuda``: TF32 / reduced-precision switches (no effect in tinyflow)."""

    def is_built(self) -> bool:
        from tinyflow import cuda as _cuda

        return _cuda.is_available()


cuda = _Cuda(matmul=SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                                    allow_bf16_reduced_precision_reduction=True),
             cufft_plan_cache=SimpleNamespace(max_size=0))
mkldnn = SimpleNamespace(enabled=False, is_available=lambda: False)
openmp = SimpleNamespace(is_available=lambda: False)
opt_einsum = SimpleNamespace(enabled=False, is_available=lambda: False)
