"""Benchmarks of whole training steps: `tinyflow bench train` (throughput per batch size and
worker count, against PyTorch) and `tinyflow bench scaling` (predicted data-parallel speedup
from an alpha-beta cost model, checked against measured runs). See README "Benchmarking".
"""
