"""The ops that only the PyTorch surface calls (Tensor methods and ``tinyflow.*`` functions beyond a
training step): math, indexing, sort, scan, layout, decomposition, special, einsum; one file per
family, as tinyflow/ops/. ``index.py`` gathers every op, the core's and these, for the surface's
Tensor methods (``ops.<Name>``); importing one family does not load the others."""
