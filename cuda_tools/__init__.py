"""The test machinery of tinyflow's CUDA kernels: nothing here is part of the product, and the
wheel does not install it (tests/test_wheel.py checks). It runs from a checkout, with the
repository's root on ``sys.path`` (tests/conftest.py puts it there for the tests; ``python -m
cuda_tools.coalescing`` from the root finds it as it is).

- ``emulator``, ``emu.h``, ``emu_trace.h``: the .cu kernels of tinyflow_cuda/csrc compiled by g++
  against a CPU emulation of CUDA, on NumPy arrays, plain or instrumented;
- ``coalescing``, ``bank_conflicts``: sectors per warp-wide access, stray accesses outside the
  arguments, and shared-memory wavefronts, measured on the instrumented emulator;
- ``strict_cupy``: a stand-in for CuPy that refuses what the pinned CuPy lacks (``cupy_api.json``)
  and counts the GPU work, for the tests marked ``cupy_strict``;
- ``ptx_lint``, ``ptx_inflight``, ``check_cu.sh`` and its allowlist: nvcc's compile check of every
  .cu file and the lint of its PTX (CI's step 1).

The product (tinyflow, tinyflow_cuda) never imports this package.
"""
