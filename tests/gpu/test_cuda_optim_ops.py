"""Optimizer steps on cuda:0 through the multi-tensor kernels (gpu tests; where no GPU is, they run
on the strict CuPy stand-in): one update launch per dtype for a whole model, no host read, and the
parameters and states the CPU optimizer (the per-parameter loop) gives."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.device import forbid_host_reads, to_host
from tinyflow.optim import SGD, Adam, AdamW

pytestmark = [pytest.mark.gpu, pytest.mark.cupy_strict]
ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)
DEVICE = "cuda:0"

CASES = [
    (SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2)),
    (SGD, dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)),
    (Adam, dict(lr=1e-2, weight_decay=1e-2, amsgrad=True)),
    (AdamW, dict(lr=1e-2)),
]
IDS = [f"{cls.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for cls, kw in CASES]


class TwoDtypes(nn.Module):
    """A float32 trunk and a bfloat16 head: the optimizer sees two dtype groups."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 8))
        self.head = nn.Linear(8, 3).to(BF16)

    def forward(self, x: tf.Tensor) -> tf.Tensor:
        return self.head(self.trunk(x).to(BF16)).float()


def _models() -> tuple[nn.Module, nn.Module]:
    tf.manual_seed(0)
    cpu = TwoDtypes()
    gpu = TwoDtypes()
    gpu.load_state_dict(cpu.state_dict())
    return cpu, gpu.to(DEVICE)


def _states(opt, params) -> list[np.ndarray]:
    out = []
    for p in params:
        for key, value in sorted(opt.state[p].items()):
            if key != "step":
                out.append(to_host(value, "test"))
    return out


@pytest.mark.parametrize("cls, kwargs", CASES, ids=IDS)
def test_step_is_one_launch_per_dtype_and_matches_the_cpu_optimizer(cls, kwargs) -> None:
    from cuda_tools import strict_cupy

    cpu_model, gpu_model = _models()
    cpu_opt = cls(cpu_model.parameters(), **kwargs)  # foreach=None: the per-parameter loop here
    gpu_opt = cls(gpu_model.parameters(), **kwargs)  # foreach=None: the multi-tensor kernels there
    rng = np.random.default_rng(0)
    for step in range(3):
        x, y = rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, 5)
        cpu_opt.zero_grad()
        F.cross_entropy(cpu_model(tf.tensor(x)), tf.tensor(y)).backward()
        for p, q in zip(cpu_model.parameters(), gpu_model.parameters()):
            q.grad = tf.tensor(p.grad.numpy(), device=DEVICE)  # the same gradients on both
        cpu_opt.step()
        with strict_cupy.record_calls() as calls, forbid_host_reads():
            gpu_opt.step()
        kernels = Counter(c for c in calls if c.startswith("kernel:"))
        name = "sgd" if cls is SGD else "adam"
        assert kernels == {f"kernel:{name}_multi_tensor_update_f32": 1,
                           f"kernel:{name}_multi_tensor_update_bf16": 1}, kernels
    for (name, p), q in zip(cpu_model.named_parameters(), gpu_model.parameters()):
        got, want = q.numpy().astype(np.float32), p.numpy().astype(np.float32)
        if p.dtype == BF16:  # one rounding apart at most; the float32 master weights agree
            np.testing.assert_allclose(got, want, rtol=2**-7, atol=2**-8, err_msg=name)
            got = got + to_host(gpu_opt.state[q]["master_residual"], "test")
            want = want + cpu_opt.state[p]["master_residual"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
    for got, want in zip(_states(gpu_opt, list(gpu_model.parameters())),
                         _states(cpu_opt, list(cpu_model.parameters()))):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
