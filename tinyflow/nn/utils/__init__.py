"""``nn.utils`` as in PyTorch: gradient clipping (it lives in tinyflow.optim, re-exported here),
parameters as one flat vector and back, weight_norm / spectral_norm, ``nn.utils.rnn``, and
``nn.utils.parametrize`` / ``nn.utils.parametrizations``.

A re-export module: its names load on first use (``tinyflow._lazy_names.attach``, below), except
weight_norm's, whose file is named like the function it defines (imported later, the file would
take the function's place as ``nn.utils.weight_norm``; imported here, the function binds after).
"""
from __future__ import annotations

from tinyflow._lazy_names import attach, by_module
from tinyflow.nn.utils.weight_norm import remove_spectral_norm, remove_weight_norm, spectral_norm, weight_norm

# module -> the names it defines (a module's own name, e.g. "rnn" for tinyflow.nn.utils.rnn,
# gives the module).
_LAZY = {
    "tinyflow.optim.clip_grad": ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_"),
    "tinyflow.nn.utils.convert_parameters": ("parameters_to_vector", "vector_to_parameters"),
    "tinyflow.nn.utils.rnn": (),
    "tinyflow.nn.utils.parametrize": (),
    "tinyflow.nn.utils.parametrizations": (),
    "tinyflow.nn.utils.stateless": (),
}

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "rnn", "weight_norm", "remove_weight_norm", "spectral_norm",
           "remove_spectral_norm", "parametrize", "parametrizations"]

attach(__name__, by_module(_LAZY), export=False)  # each name loads its file on first use
