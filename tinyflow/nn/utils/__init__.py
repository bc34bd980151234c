"""``nn.utils`` as in PyTorch: gradient clipping (it lives in tinyflow.optim, re-exported here),
parameters as one flat vector and back, weight_norm / spectral_norm, ``nn.utils.rnn``,
``nn.utils.parametrize`` / ``nn.utils.parametrizations`` and ``nn.utils.stateless``.

A re-export module. weight_norm's file is named like the function it defines: importing the
function after the file leaves the function as ``nn.utils.weight_norm``, as in PyTorch.
``parametrizations`` (orthogonal needs torch.linalg) is the PyTorch surface: the surface's seam
imports it (docs/design.md, "The rings"), this module does not.
"""
from __future__ import annotations

from tinyflow.nn.utils import convert_parameters, parametrize, rnn, stateless
from tinyflow.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from tinyflow.nn.utils.weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm
from tinyflow.optim.clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "rnn", "weight_norm", "remove_weight_norm", "spectral_norm",
           "remove_spectral_norm", "parametrize"]
