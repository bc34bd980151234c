"""The CPU reference kernels: the kernel module of the ``cpu`` device.

One file per family (activation, conv, winograd, pool, lrn, rnn, embedding, loss, random, optim,
allreduce). Each is a plain function over arrays, written against ``xp`` where it can be, and the
families of ``FAMILIES`` are the contract: ``tinyflow_cuda/kernels/<family>.py`` (over
``csrc/<family>.cu``) defines the same names with the same signatures for CUDA arrays. Winograd
is the one CPU-only family (``CPU_ONLY``): a GPU convolution is im2col + a cuBLAS GEMM, so the
convolution op asks for it on NumPy arrays only. ``shapes`` (output sizes, int-or-pair
arguments) and ``_cpu`` (workspaces, threads) are helpers, not families; ``optim_adaptive``
is the optim family's Adam, Adadelta and GradScaler half, which ``optim`` loads on first use.

Ops never import a kernel by name from here: they ask their context for the kernel module of
their inputs' device (``ctx.kernels.im2col(...)``; outside an op, ``tinyflow.device.kernels_of``).
That is the one place that decides whether the reference or its CUDA twin runs.

This file gathers names and defines none: each family is imported when one of its kernels is
first asked for, so a step loads only the kernels it runs.
"""
# family -> the kernels it defines (its __all__)
_KERNELS = {
    "activation": ("relu_forward relu_backward"),
    "allreduce": ("reduce_add reduce_scale"),
    "batchnorm": ("batch_norm_forward batch_norm_backward"),
    "conv": ("im2col col2im conv_output conv_output_grad"),
    "embedding": ("embedding_backward"),
    "loss": ("log_softmax_forward softmax_cross_entropy_forward softmax_cross_entropy_backward"),
    "lrn": ("lrn_forward lrn_backward"),
    "optim": (
        "sgd_momentum_update adam_update adadelta_update sgd_multi_tensor_update "
        "adam_multi_tensor_update amp_update_scale"),
    "pool": ("maxpool2d_forward maxpool2d_backward avgpool2d_forward avgpool2d_backward"),
    "random": ("dropout_mask"),
    "rnn": (
        "lstm_cell_forward lstm_cell_backward gru_cell_forward gru_cell_backward "
        "lstm_sequence_forward lstm_sequence_backward gru_sequence_forward "
        "gru_sequence_backward"),
    "winograd": ("winograd_conv2d_forward winograd_conv2d_backward"),
}
_FAMILY_NAMES = ("activation", "allreduce", "batchnorm", "conv", "embedding", "loss", "lrn", "optim", "pool",
                 "random", "rnn")  # FAMILIES: mirrored by tinyflow_cuda/kernels/, in this order
_CPU_ONLY_NAMES = ("winograd",)  # CPU_ONLY: no CUDA twin; ops call it on NumPy arrays only
_WHERE = {kernel: family for family, names in _KERNELS.items() for kernel in names.split()}

__all__ = sorted(_WHERE)


def __getattr__(name: str):  # noqa: ANN202
    """A kernel (its family imported on first use), a family module, or FAMILIES / CPU_ONLY."""
    import importlib

    if name in _WHERE:
        value = getattr(importlib.import_module(f"tinyflow.kernels.{_WHERE[name]}"), name)
        globals()[name] = value  # found directly from now on (ops ask for kernels on every call)
        return value
    if name in _KERNELS:
        return importlib.import_module(f"tinyflow.kernels.{name}")
    if name in ("FAMILIES", "CPU_ONLY"):
        names = _FAMILY_NAMES if name == "FAMILIES" else _CPU_ONLY_NAMES
        return tuple(importlib.import_module(f"tinyflow.kernels.{n}") for n in names)
    raise AttributeError(f"module 'tinyflow.kernels' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | set(_KERNELS) | {"FAMILIES", "CPU_ONLY"})
