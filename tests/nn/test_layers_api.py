"""nn's PyTorch surface beyond the layers' maths: torch.nn.modules.* import paths, the
containers' list and dict methods, ParameterList / ParameterDict, nn.utils."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("path, name", [
    ("conv", "Conv2d"), ("conv", "ConvTranspose2d"), ("loss", "CrossEntropyLoss"), ("loss", "BCEWithLogitsLoss"),
    ("module", "Module"), ("linear", "Linear"), ("activation", "ReLU"), ("batchnorm", "BatchNorm2d"),
    ("pooling", "MaxPool2d"), ("dropout", "Dropout"), ("container", "Sequential"), ("rnn", "LSTM"),
    ("sparse", "Embedding"), ("normalization", "LayerNorm"), ("padding", "ReflectionPad2d"),
    ("upsampling", "Upsample"), ("flatten", "Flatten"), ("instancenorm", "InstanceNorm2d"),
    ("pixelshuffle", "PixelShuffle"), ("fold", "Unfold"), ("distance", "CosineSimilarity"),
    ("transformer", "TransformerEncoderLayer"), ("activation", "MultiheadAttention"), ("sparse", "EmbeddingBag"),
    ("normalization", "RMSNorm"), ("channelshuffle", "ChannelShuffle"),
])
def test_torch_nn_modules_paths_give_the_nn_classes(path, name):
    assert getattr(importlib.import_module(f"tinyflow.nn.modules.{path}"), name) is getattr(nn, name)
    assert getattr(importlib.import_module(f"torch.nn.modules.{path}"), name) is getattr(torch.nn, name)
    assert getattr(nn.modules, name) is getattr(nn, name)


# what tinyflow leaves out: fractional pools, CTC, lazy and quantization-era layers
ABSENT = {
    "loss.LinearCrossEntropyLoss",
    "loss.CTCLoss", "pooling.MaxUnpool3d", "pooling.FractionalMaxPool2d", "pooling.FractionalMaxPool3d",
    "normalization.CrossMapLRN2d", "batchnorm.SyncBatchNorm", "container.Container", "rnn.RNNBase",
    "rnn.RNNCellBase",
}


def test_every_torch_nn_module_of_these_files_exists_in_tinyflow():
    missing = set()
    for path in ("activation", "loss", "padding", "pooling", "conv", "normalization", "batchnorm", "dropout",
                 "upsampling", "pixelshuffle", "fold", "distance", "flatten", "instancenorm", "linear", "container",
                 "sparse", "rnn", "transformer"):
        theirs = importlib.import_module(f"torch.nn.modules.{path}").__all__
        ours = importlib.import_module(f"tinyflow.nn.modules.{path}")
        missing |= {f"{path}.{n}" for n in theirs if not hasattr(ours, n) and "Lazy" not in n}
    assert missing <= ABSENT, sorted(missing - ABSENT)


LAYER_FILES = ("activation", "batchnorm", "channelshuffle", "container", "conv", "distance", "dropout", "flatten",
               "fold", "instancenorm", "linear", "loss", "normalization", "padding", "pixelshuffle", "pooling", "rnn",
               "sparse", "transformer", "upsampling")


def test_every_layer_is_defined_in_the_file_torch_defines_it_in():
    """A family is one file: ELU is defined in nn/modules/activation.py, as torch's ELU is in
    torch/nn/modules/activation.py (so its __module__ and a pickle name that file)."""
    wrong = {}
    for name in nn.modules.__all__:
        ours, theirs = getattr(nn, name), getattr(torch.nn, name, None)
        expected = theirs.__module__.replace("torch.", "tinyflow.", 1) if theirs is not None else None
        if expected is not None and expected.startswith("tinyflow.nn.modules.") and ours.__module__ != expected:
            wrong[name] = ours.__module__
    assert not wrong, wrong
    assert nn.ELU.__module__ == "tinyflow.nn.modules.activation" and nn.Conv3d.__module__ == "tinyflow.nn.modules.conv"


def test_the_layer_index_gathers_each_files_names_and_nothing_is_loaded_on_first_use():
    gathered = ["Module"]
    for file in LAYER_FILES:
        module = importlib.import_module(f"tinyflow.nn.modules.{file}")
        gathered += module.__all__
        assert all(getattr(module, n).__module__ == module.__name__ for n in module.__all__), file
        namespace: dict = {}
        exec(f"from tinyflow.nn.modules.{file} import *", namespace)  # the whole family: ReLU and ELU
        assert set(module.__all__) <= set(namespace), file
    assert nn.modules.__all__ == gathered and len(set(gathered)) == len(gathered)
    assert set(nn.modules.__all__) <= set(nn.__all__) and all(getattr(nn, n) is getattr(nn.modules, n)
                                                              for n in nn.modules.__all__)
    from tinyflow.nn import init, utils

    for module in (nn, nn.modules, utils, init):  # plain modules: no first-use table
        assert "__getattr__" not in vars(module), module.__name__
    with pytest.raises(AttributeError, match="NoSuchLayer"):
        nn.NoSuchLayer  # noqa: B018
    assert callable(init.orthogonal_) and init.orthogonal_.__module__ == "tinyflow.nn.init"


def test_the_old_layer_paths_are_gone():
    """tinyflow/nn/<file>.py and the *_extra files are no more: their module paths do not import
    (a pickle that names tinyflow.nn.conv.Conv2d, made before nn/modules/, no longer loads)."""
    for path in ("tinyflow.nn.conv", "tinyflow.nn.container", "tinyflow.nn.modules.activation_extra",
                 "tinyflow.nn.modules.conv_extra", "tinyflow.nn.init_extra"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(path)
    import pickle

    old = pickle.dumps(nn.Sequential, protocol=0).replace(b"tinyflow.nn.modules.container", b"tinyflow.nn.container")
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)


def test_sequential_and_module_list_edits_as_in_torch():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    seq.insert(1, nn.Tanh())
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "ReLU", "Linear"]
    del seq[2]
    seq.append(nn.Sigmoid())
    assert [type(m).__name__ for m in seq] == ["Linear", "Tanh", "Linear", "Sigmoid"]
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert isinstance(seq.pop(-1), nn.Sigmoid) and len(seq) == 3
    seq[1] = nn.ReLU()
    assert isinstance(seq[1], nn.ReLU) and len(seq + nn.Sequential(nn.Tanh())) == 4
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml += [nn.Linear(1, 2)]
    ml.insert(0, nn.Identity())
    assert len(ml) == 3 and isinstance(ml[0], nn.Identity) and len(list(ml.parameters())) == 4
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    md.update({"b": nn.ReLU()})
    assert "b" in md and list(md.keys()) == ["a", "b"] and isinstance(md.pop("b"), nn.ReLU)


def test_parameter_list_and_dict_register_parameters_like_torch():
    pl = nn.ParameterList([nn.Parameter(tf.zeros(2)), tf.ones(3)])
    assert all(isinstance(p, nn.Parameter) for p in pl) and len(list(pl.parameters())) == 2
    pd = nn.ParameterDict({"w": tf.zeros(2, 2), "b": nn.Parameter(tf.zeros(2))})  # a dict: sorted keys

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pl, self.pd = pl, pd

    theirs = torch.nn.Module()
    theirs.pl = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(2)), torch.ones(3)])
    theirs.pd = torch.nn.ParameterDict({"w": torch.zeros(2, 2), "b": torch.nn.Parameter(torch.zeros(2))})
    assert list(Net().state_dict()) == list(theirs.state_dict())
    pd["a"] = tf.ones(1)
    assert list(pd.keys()) == ["b", "w", "a"] and isinstance(pd["a"], nn.Parameter)


def test_nn_utils_vectors_and_clipping():
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    vec = nn.utils.parameters_to_vector(net.parameters())
    assert vec.shape == (11,)
    nn.utils.vector_to_parameters(tf.arange(11.0), net.parameters())
    np.testing.assert_array_equal(net[0].weight.numpy().ravel(), np.arange(6.0))
    np.testing.assert_array_equal(net[1].bias.numpy(), [10.0])
    with pytest.raises(ValueError, match="11 elements"):
        nn.utils.vector_to_parameters(tf.zeros(3), net.parameters())
    net(tf.ones(4, 3)).sum().backward()
    norm = nn.utils.clip_grad_norm_(net.parameters(), 0.1)
    assert float(norm) > 0.1 and nn.utils.clip_grad_norm is not None
    nn.utils.clip_grad_value_(net.parameters(), 0.01)
    assert max(float(p.grad.abs().max()) for p in net.parameters()) <= 0.01 + 1e-7
    from tinyflow.nn.utils.rnn import pad_sequence

    seqs = [np.ones((3, 2), np.float32), 2 * np.ones((1, 2), np.float32)]
    for batch_first in (False, True):
        ours = pad_sequence([tf.tensor(s) for s in seqs], batch_first=batch_first, padding_value=-1.0)
        ref = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=batch_first,
                                              padding_value=-1.0)
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.parametrize("kwargs", [dict(), dict(num_layers=2, nonlinearity="relu", batch_first=True),
                                    dict(bidirectional=True, bias=False)])
def test_elman_rnn_and_cell_match_torch(kwargs):
    ours, theirs = nn.RNN(3, 4, **kwargs), torch.nn.RNN(3, 4, **kwargs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) and repr(ours) == repr(theirs)
    for name, p in theirs.named_parameters():
        getattr(ours, name).array[...] = p.detach().numpy()
    x = np.random.default_rng(0).standard_normal((5, 2, 3)).astype(np.float32)
    a, b = tf.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    (out, h), (ref, ref_h) = ours(a), theirs(b)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h.numpy(), ref_h.detach().numpy(), rtol=1e-5, atol=1e-6)
    (out.sum() + h.sum()).backward()
    (ref.sum() + ref_h.sum()).backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)
    cell, ref_cell = nn.RNNCell(3, 4, nonlinearity="relu"), torch.nn.RNNCell(3, 4, nonlinearity="relu")
    for name, p in ref_cell.named_parameters():
        getattr(cell, name).array[...] = p.detach().numpy()
    np.testing.assert_allclose(cell(tf.tensor(x[0])).numpy(), ref_cell(torch.tensor(x[0])).detach().numpy(), rtol=1e-5)
    assert repr(cell) == repr(ref_cell)


def test_more_init_functions_follow_torch():
    w = tf.empty(4, 6)
    nn.init.orthogonal_(w, gain=1.5)
    np.testing.assert_allclose(w.numpy() @ w.numpy().T, 2.25 * np.eye(4), atol=1e-5)
    tall = tf.empty(6, 2, 2)
    nn.init.orthogonal_(tall)
    flat = tall.numpy().reshape(6, 4)
    np.testing.assert_allclose(flat.T @ flat, np.eye(4), atol=1e-5)
    for shape, groups in [((4, 4, 3), 1), ((6, 2, 3, 3), 3), ((2, 3, 1, 3, 3), 1)]:
        ours, theirs = tf.empty(*shape), torch.empty(*shape)
        nn.init.dirac_(ours, groups)
        torch.nn.init.dirac_(theirs, groups)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    e = tf.empty(3, 5)
    nn.init.eye_(e)
    np.testing.assert_array_equal(e.numpy(), np.eye(3, 5))
    s = tf.empty(20, 3)
    nn.init.sparse_(s, 0.25)
    assert ((s.numpy() == 0).sum(0) >= 5).all()
    for name in ("conv_transpose2d", "selu", "tanh", "leaky_relu"):
        assert nn.init.calculate_gain(name) == pytest.approx(torch.nn.init.calculate_gain(name))
    with pytest.warns(FutureWarning):
        nn.init.xavier_uniform(tf.empty(2, 2))


def test_module_api_follows_torch():
    net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    ref = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))
    assert net.get_parameter("0.weight") is net[0].weight and net.get_buffer("1.running_mean") is net[1].running_mean
    assert list(net.state_dict(keep_vars=True).values())[0] is net[0].weight
    assert list(net.state_dict(prefix="m.")) == list(ref.state_dict(prefix="m."))
    shared = nn.Linear(2, 2)
    tied = nn.Sequential(shared, shared)
    assert len(list(tied.named_parameters())) == 2 and len(list(tied.named_parameters(remove_duplicate=False))) == 4
    assert len(list(tied.named_modules())) == 2 and len(list(tied.named_modules(remove_duplicate=False))) == 3
    with pytest.raises(RuntimeError, match="Missing keys"):
        net.load_state_dict({})
    with pytest.raises(RuntimeError, match="shape mismatch"):
        net.load_state_dict({**net.state_dict(), "0.bias": np.zeros(4)})
    fresh = {k: np.full(v.shape, 0.5, np.float32) for k, v in net.state_dict().items() if v.dtype == tf.float32}
    result = net.load_state_dict(fresh, strict=False, assign=True)
    assert result.missing_keys == ["1.num_batches_tracked"] and float(net[0].bias[0]) == 0.5
    assert net.type(tf.float64)[0].weight.dtype == tf.float64 and net.share_memory() is net


def test_hooks_return_removable_handles_and_take_kwargs():
    lin = nn.Linear(2, 2)
    seen = []
    handle = lin.register_forward_hook(lambda m, args, kwargs, out: seen.append(sorted(kwargs)), with_kwargs=True)
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    first = lin.register_forward_pre_hook(lambda m, args: seen.append("first"), prepend=True)
    out = lin(tf.ones(1, 2))
    np.testing.assert_allclose(out.numpy(), lin.bias.numpy()[None])  # the pre-hook zeroed the input
    assert seen == ["first", []]
    handle.remove()
    pre()  # tinyflow's older form: calling the handle removes it
    with first:
        pass
    lin(tf.ones(1, 2))
    assert seen == ["first", []]


def test_full_backward_hooks_see_the_gradients_torch_shows():
    records = {}
    for name, lib in (("theirs", torch), ("ours", tf)):
        conv = lib.nn.Conv2d(2, 3, 3)
        if lib is tf:
            conv.load_state_dict(records["weights"])
        else:
            records["weights"] = {k: v.detach().numpy() for k, v in conv.state_dict().items()}
        seen = []
        conv.register_full_backward_pre_hook(lambda m, go, seen=seen: seen.append(("pre", go[0].numpy().copy())))
        conv.register_full_backward_hook(lambda m, gi, go, seen=seen: seen.append(("full", gi[0].numpy().copy(),
                                                                                    go[0].numpy().copy())))
        x = lib.tensor(np.random.default_rng(5).standard_normal((1, 2, 5, 5)).astype(np.float32), requires_grad=True)
        (conv(x) ** 2).sum().backward()
        records[name] = seen
    ours, theirs = records["ours"], records["theirs"]
    assert [r[0] for r in ours] == [r[0] for r in theirs] == ["pre", "full"]
    for a, b in zip(ours, theirs):
        for u, v in zip(a[1:], b[1:]):
            np.testing.assert_allclose(u, v, rtol=1e-5, atol=1e-5)
    lin = nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x = tf.ones(1, 2, requires_grad=True)
    lin(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)  # the hook replaced grad_input


def test_data_parallel_wrapper_keeps_torch_names():
    inner = nn.Linear(2, 3)
    model = nn.DataParallel(inner, device_ids=[0])
    assert model.module is inner and list(model.state_dict()) == ["module.weight", "module.bias"]
    np.testing.assert_array_equal(model(tf.ones(4, 2)).numpy(), inner(tf.ones(4, 2)).numpy())
    assert nn.parallel.data_parallel(inner, tf.ones(1, 2)).shape == (1, 3)


@pytest.mark.filterwarnings("ignore:torch.nn.utils.weight_norm is deprecated")
def test_weight_norm_and_spectral_norm_match_torch():
    x = np.random.default_rng(12).standard_normal((2, 3, 5, 5)).astype(np.float32)
    for dim in (0, None, 1):
        ours, theirs = nn.Conv2d(3, 4, 3), torch.nn.Conv2d(3, 4, 3)
        ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
        nn.utils.weight_norm(ours, dim=dim)
        torch.nn.utils.weight_norm(theirs, dim=dim)
        assert list(ours.state_dict()) == list(theirs.state_dict())
        out, ref = ours(tf.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
        (out**2).sum().backward()
        (ref**2).sum().backward()
        for name in ("weight_g", "weight_v", "bias"):
            np.testing.assert_allclose(getattr(ours, name).grad.numpy(), getattr(theirs, name).grad.numpy(),
                                       rtol=1e-4, atol=1e-4)
        nn.utils.remove_weight_norm(ours)
        torch.nn.utils.remove_weight_norm(theirs)
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    ours, theirs = nn.Linear(5, 4), torch.nn.Linear(5, 4)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    nn.utils.spectral_norm(ours)
    torch.nn.utils.spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    for _ in range(4):  # power iterations in training, on the same buffers
        out, ref = ours(tf.tensor(x[0, 0])), theirs(torch.tensor(x[0, 0]))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours.weight_u.numpy(), theirs.weight_u.numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ours.weight_orig.grad.numpy(), theirs.weight_orig.grad.numpy(), rtol=1e-4, atol=1e-5)
    nn.utils.remove_spectral_norm(ours)
    torch.nn.utils.remove_spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
