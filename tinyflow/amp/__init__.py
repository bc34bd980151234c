"""``torch.amp``: mixed precision. autocast_mode.py casts what an op computes in (bf16/fp16 GEMMs,
float32 for the precision-sensitive ops), grad_scaler.py scales fp16 losses. This file gathers
names and defines none; see autocast_mode.py's docstring for the rules and docs/cuda.md."""
from tinyflow.amp.autocast_mode import (
    autocast, autocast_dtype, autocast_inputs, bfloat16, clear_autocast_cache, float32_inputs,
    is_autocast_cache_enabled, is_autocast_enabled,
)
from tinyflow.amp.grad_scaler import GradScaler

__all__ = [
    "autocast", "autocast_dtype", "autocast_inputs", "float32_inputs", "is_autocast_enabled",
    "is_autocast_cache_enabled", "clear_autocast_cache", "bfloat16", "GradScaler",
]
