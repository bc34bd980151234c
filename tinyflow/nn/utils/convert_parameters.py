"""Parameters as one flat vector and back (``torch.nn.utils.convert_parameters``)."""
from __future__ import annotations

from collections.abc import Iterable

from tinyflow.tensor import Tensor, cat

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Every parameter flattened and concatenated into one 1-D tensor (a copy, differentiable)."""
    params = list(parameters)
    devices = {p.device for p in params}
    if len(devices) > 1:
        raise TypeError(f"parameters_to_vector: found parameters on different devices {sorted(map(str, devices))}")
    return cat([p.reshape(-1) for p in params])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the 1-D ``vec`` into the parameters (in place, no graph)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, but got {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.ndim != 1 or vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vec of shape {tuple(vec.shape)} must be 1-D with {total} elements, "
                         "one per parameter entry")
    src = vec.array
    offset = 0
    for p in params:
        n = p.numel()
        p.array[...] = src[offset:offset + n].reshape(p.shape).astype(p.dtype, copy=False)
        p._versions[0] += 1
        offset += n
