"""Model zoo: parameter names, shapes and counts against the torchvision definitions (hard-coded
here, torchvision is not a dependency), per-layer output shapes, weight loading from identical
PyTorch models, the registry, input errors, and a small end-to-end training run."""
from __future__ import annotations

import numpy as np
import pytest

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.nn.functional as F
from tinyflow.models import MODELS, get_config, get_model

# torchvision.models.alexnet(): every parameter, in order (torchvision/models/alexnet.py)
TORCHVISION_ALEXNET = [
    ("features.0.weight", (64, 3, 11, 11)), ("features.0.bias", (64,)),
    ("features.3.weight", (192, 64, 5, 5)), ("features.3.bias", (192,)),
    ("features.6.weight", (384, 192, 3, 3)), ("features.6.bias", (384,)),
    ("features.8.weight", (256, 384, 3, 3)), ("features.8.bias", (256,)),
    ("features.10.weight", (256, 256, 3, 3)), ("features.10.bias", (256,)),
    ("classifier.1.weight", (4096, 9216)), ("classifier.1.bias", (4096,)),
    ("classifier.4.weight", (4096, 4096)), ("classifier.4.bias", (4096,)),
    ("classifier.6.weight", (1000, 4096)), ("classifier.6.bias", (1000,)),
]
# output (C, H, W) after each module of torchvision AlexNet's `features` for a 224x224 image
TORCHVISION_ALEXNET_FEATURE_SHAPES = [
    (64, 55, 55), (64, 55, 55), (64, 27, 27),  # conv1, relu, pool
    (192, 27, 27), (192, 27, 27), (192, 13, 13),  # conv2, relu, pool
    (384, 13, 13), (384, 13, 13), (256, 13, 13), (256, 13, 13),  # conv3, relu, conv4, relu
    (256, 13, 13), (256, 13, 13), (256, 6, 6),  # conv5, relu, pool
]


def torchvision_resnet18_state() -> list[tuple[str, tuple[int, ...]]]:
    """The state_dict keys and shapes of torchvision.models.resnet18(), from its definition."""
    out: list[tuple[str, tuple[int, ...]]] = []

    def bn(prefix: str, c: int) -> None:
        out.extend([(f"{prefix}.weight", (c,)), (f"{prefix}.bias", (c,)), (f"{prefix}.running_mean", (c,)),
                    (f"{prefix}.running_var", (c,)), (f"{prefix}.num_batches_tracked", ())])

    out.append(("conv1.weight", (64, 3, 7, 7)))
    bn("bn1", 64)
    cin = 64
    for layer, width in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            p = f"layer{layer}.{block}"
            out.append((f"{p}.conv1.weight", (width, cin, 3, 3)))
            bn(f"{p}.bn1", width)
            out.append((f"{p}.conv2.weight", (width, width, 3, 3)))
            bn(f"{p}.bn2", width)
            if block == 0 and layer > 1:
                out.append((f"{p}.downsample.0.weight", (width, cin, 1, 1)))
                bn(f"{p}.downsample.1", width)
            cin = width
    out += [("fc.weight", (1000, 512)), ("fc.bias", (1000,))]
    return out


def n_params(model: nn.Module) -> int:
    return sum(int(np.prod(p.shape)) for p in model.parameters())


def test_alexnet_224_has_torchvision_names_shapes_and_count():
    model = get_model("alexnet-224")
    assert [(k, tuple(p.shape)) for k, p in model.named_parameters()] == TORCHVISION_ALEXNET
    assert n_params(model) == 61_100_840
    assert all(p.dtype == tf.float32 for p in model.parameters())


def _feature_shapes(model: nn.Module, x: tf.Tensor) -> list[tuple[int, ...]]:
    shapes = []
    for layer in model.features:
        layer.register_forward_hook(lambda m, inp, out: shapes.append(tuple(out.shape[1:])))
    with tf.no_grad():
        model.eval()(x)
    return shapes


def test_alexnet_224_per_layer_shapes_match_torchvision():
    model = get_model("alexnet-224", num_classes=10, hidden=16)
    assert _feature_shapes(model, tf.randn(1, 3, 224, 224)) == TORCHVISION_ALEXNET_FEATURE_SHAPES


def test_alexnet_64_preset_shapes_and_size():
    cfg = get_config("alexnet")
    assert (cfg.image_size, cfg.num_classes) == (64, 200)
    model = get_model("alexnet", num_classes=10)
    assert _feature_shapes(model, tf.randn(2, 3, 64, 64)) == [
        (64, 32, 32), (64, 32, 32), (64, 15, 15), (192, 15, 15), (192, 15, 15), (192, 7, 7),
        (384, 7, 7), (384, 7, 7), (256, 7, 7), (256, 7, 7), (256, 7, 7), (256, 7, 7), (256, 3, 3)]
    assert model(tf.randn(2, 3, 64, 64)).shape == (2, 10)


def test_alexnet_2012_two_towers_with_lrn():
    model = get_model("alexnet-2012")
    shapes = dict((k, tuple(p.shape)) for k, p in model.named_parameters())
    convs = [s for k, s in shapes.items() if k.startswith("features") and k.endswith("weight")]
    # groups=2 halves the input channels each filter sees on conv2, conv4, conv5 (Caffe's bvlc_alexnet)
    assert convs == [(96, 3, 11, 11), (256, 48, 5, 5), (384, 256, 3, 3), (384, 192, 3, 3), (256, 192, 3, 3)]
    assert n_params(model) == 60_965_224
    lrns = [m for m in model.features if isinstance(m, nn.LocalResponseNorm)]
    assert [(m.size, m.alpha, m.beta, m.k) for m in lrns] == [(5, 1e-4, 0.75, 2.0)] * 2
    shapes = _feature_shapes(get_model("alexnet-2012", hidden=16), tf.randn(1, 3, 224, 224))
    assert shapes[3] == (96, 27, 27) and shapes[-1] == (256, 6, 6)


def test_resnet18_has_torchvision_state_dict_and_count():
    model = get_model("resnet18")
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == torchvision_resnet18_state()
    assert n_params(model) == 11_689_512


@pytest.mark.parametrize("name, count", [("resnet20", 269_722), ("resnet56", 853_018), ("fcn-r", 14_205_962)])
def test_parameter_counts_of_the_dlbench_models(name, count):
    # ResNet-20/56 with option-A shortcuts: 0.27M and 0.85M (He et al. 2016, table 6);
    # FCN-R: 784*2048 + 2048*4096 + 4096*1024 + 1024*10 weights plus biases
    assert n_params(get_model(name)) == count


def test_resnet_cifar_shapes_and_projection_option():
    model = get_model("resnet20")
    assert model(tf.randn(2, 3, 32, 32)).shape == (2, 10)
    b = get_model("resnet20", shortcut="B", num_classes=5)
    assert "layer2.0.downsample.0.weight" in b.state_dict()
    assert b(tf.randn(1, 3, 16, 16)).shape == (1, 5)


def _torch_alexnet_module(torch, num_classes: int, hidden: int = 4096):
    """torchvision's AlexNet definition written with torch.nn only (hidden=4096 there)."""
    tnn = torch.nn

    class TorchAlexNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.features = tnn.Sequential(
                tnn.Conv2d(3, 64, 11, 4, 2), tnn.ReLU(), tnn.MaxPool2d(3, 2),
                tnn.Conv2d(64, 192, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(3, 2),
                tnn.Conv2d(192, 384, 3, padding=1), tnn.ReLU(), tnn.Conv2d(384, 256, 3, padding=1), tnn.ReLU(),
                tnn.Conv2d(256, 256, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(3, 2))
            self.avgpool = tnn.AdaptiveAvgPool2d((6, 6))
            self.classifier = tnn.Sequential(
                tnn.Dropout(0.5), tnn.Linear(9216, hidden), tnn.ReLU(), tnn.Dropout(0.5),
                tnn.Linear(hidden, hidden), tnn.ReLU(), tnn.Linear(hidden, num_classes))

        def forward(self, x):
            return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))

    return TorchAlexNet()


def test_alexnet_loads_pytorch_weights_and_gives_the_same_outputs():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = _torch_alexnet_module(torch, 10, hidden=256).eval()
    ours = get_model("alexnet-224", num_classes=10, hidden=256).eval()
    ours.load_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with tf.no_grad():
        y = ours(tf.tensor(x)).numpy()
    with torch.no_grad():
        expected = ref(torch.tensor(x)).numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-5)


def _torch_resnet18(torch, num_classes: int):
    """torchvision's resnet18 written with torch.nn only."""
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = tnn.BatchNorm2d(cout)
            self.relu = tnn.ReLU()
            self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = tnn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False), tnn.BatchNorm2d(cout))

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            return self.relu(self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x))))) + idt)

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = tnn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = tnn.BatchNorm2d(64)
            self.relu = tnn.ReLU()
            self.maxpool = tnn.MaxPool2d(3, 2, 1)
            cin = 64
            for i, w in enumerate((64, 128, 256, 512), start=1):
                setattr(self, f"layer{i}", tnn.Sequential(Block(cin, w, 1 if i == 1 else 2), Block(w, w, 1)))
                cin = w
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(512, num_classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return Net()


def test_resnet18_loads_pytorch_weights_and_matches_in_train_and_eval():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = _torch_resnet18(torch, 7)
    ours = get_model("resnet18", num_classes=7)
    ours.load_state_dict(ref.state_dict())
    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    y = ours(tf.tensor(x)).numpy()  # training mode: batch statistics, running stats updated
    expected = ref(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-4)
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
    ours.eval()
    ref.eval()
    with tf.no_grad():
        y = ours(tf.tensor(x)).numpy()
    np.testing.assert_allclose(y, ref(torch.tensor(x)).detach().numpy(), rtol=1e-3, atol=1e-4)


def test_registry_and_overrides():
    assert {"alexnet", "alexnet-224", "alexnet-2012", "resnet20", "resnet56", "resnet18", "fcn-r"} <= set(MODELS)
    model = get_model("alexnet", num_classes=3, hidden=64)
    assert model.classifier[6].weight.shape == (3, 64)
    with pytest.raises(ValueError, match=r"unknown model 'vgg'.*alexnet"):
        get_model("vgg")
    with pytest.raises(ValueError, match=r"no config field\(s\) \['num_clases'\]"):
        get_model("alexnet", num_clases=3)
    with pytest.raises(ValueError, match="groups=2"):
        get_model("alexnet", channels=(63, 192, 384, 256, 256), groups=(1, 2, 1, 1, 1))
    with pytest.raises(ValueError, match="image_size=16 is too small"):
        get_model("alexnet", image_size=16)


@pytest.mark.parametrize(
    "name, shape, words",
    [
        ("alexnet", (2, 1, 64, 64), ["AlexNet", "3 channels", "(2, 1, 64, 64)"]),
        ("alexnet", (2, 3, 32, 32), ["AlexNet", "64x64", "32x32"]),
        ("alexnet", (3, 64, 64), ["AlexNet", "(N, C, H, W)", "(3, 64, 64)"]),
        ("resnet20", (2, 4, 32, 32), ["ResNetCifar", "3 channels", "(2, 4, 32, 32)"]),
        ("fcn-r", (2, 100), ["FCN", "784", "(2, 100)"]),
    ],
)
def test_wrong_input_is_a_clear_error(name, shape, words):
    model = get_model(name) if name != "alexnet" else get_model(name, hidden=16)
    with pytest.raises(ValueError) as err:
        model(tf.zeros(*shape))
    for word in words:
        assert word in str(err.value)


def _torch_small_alexnet64(torch, channels, hidden, num_classes):
    """The 64x64 AlexNet preset (conv1 5x5/2) with small widths, in torch.nn."""
    tnn = torch.nn
    c1, c2, c3, c4, c5 = channels
    net = tnn.Module()
    net.features = tnn.Sequential(
        tnn.Conv2d(3, c1, 5, 2, 2), tnn.ReLU(), tnn.MaxPool2d(3, 2),
        tnn.Conv2d(c1, c2, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(3, 2),
        tnn.Conv2d(c2, c3, 3, padding=1), tnn.ReLU(), tnn.Conv2d(c3, c4, 3, padding=1), tnn.ReLU(),
        tnn.Conv2d(c4, c5, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(3, 2))
    net.avgpool = tnn.AdaptiveAvgPool2d((3, 3))
    net.classifier = tnn.Sequential(
        tnn.Dropout(0.0), tnn.Linear(c5 * 9, hidden), tnn.ReLU(), tnn.Dropout(0.0),
        tnn.Linear(hidden, hidden), tnn.ReLU(), tnn.Linear(hidden, num_classes))
    net.forward = lambda x: net.classifier(torch.flatten(net.avgpool(net.features(x)), 1))
    return net


def test_alexnet_training_steps_match_pytorch_step_for_step():
    """Same weights, same batch, SGD with momentum: the losses and weights of tinyflow and
    PyTorch agree after every step (forward, backward and update of the whole network)."""
    torch = pytest.importorskip("torch")
    channels, hidden = (8, 16, 16, 16, 16), 32
    tf.manual_seed(0)
    ours = get_model("alexnet", num_classes=4, channels=channels, hidden=hidden, dropout=0.0)
    ref = _torch_small_alexnet64(torch, channels, hidden, 4)
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    x = tf.randn(4, 3, 64, 64) * 2
    target = tf.tensor([0, 1, 2, 3], dtype=tf.int64)
    opt = tf.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9)
    ref_params = list(ref.parameters())
    ref_bufs = [None] * len(ref_params)
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(ours(x), target)
        loss.backward()
        opt.step()
        ref.zero_grad()
        ref_loss = torch.nn.functional.cross_entropy(ref.forward(torch.tensor(x.numpy())), torch.tensor(target.numpy()))
        ref_loss.backward()
        with torch.no_grad():  # torch.optim.SGD's rule, written out (its first use imports dynamo: slow)
            for i, p in enumerate(ref_params):
                ref_bufs[i] = p.grad.clone() if ref_bufs[i] is None else ref_bufs[i] * 0.9 + p.grad
                p -= 0.1 * ref_bufs[i]
        assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-4, abs=1e-5)
    for k, v in ref.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-3, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name, overrides, shape", [
    ("alexnet-2012", dict(num_classes=4, channels=(8, 16, 16, 16, 16), hidden=32, dropout=0.0, image_size=67),
     (8, 3, 67, 67)),
    ("resnet20", dict(num_classes=4, widths=(4, 8, 8)), (8, 3, 16, 16)),
])
def test_small_models_fit_a_fixed_batch(name, overrides, shape):
    """Adam on one batch of random images with arbitrary labels must drive the loss well down."""
    tf.manual_seed(0)
    model = get_model(name, **overrides)
    x = tf.randn(*shape)
    target = tf.tensor(np.arange(shape[0]) % 4, dtype=tf.int64)
    opt = tf.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_alexnet_training_step_stays_float32_end_to_end():
    model = get_model("alexnet-2012", num_classes=3, channels=(8, 16, 16, 16, 16), hidden=16, image_size=67)
    x = tf.randn(2, 3, 67, 67)
    logits = model(x)
    F.cross_entropy(logits, tf.tensor([0, 2], dtype=tf.int64)).backward()
    assert logits.dtype == tf.float32
    assert {p.grad.dtype for p in model.parameters()} == {tf.float32}


def test_a_program_registers_its_own_model_in_MODELS():  # noqa: N802 (the registry's name)
    from dataclasses import dataclass

    import tinyflow.nn as nn
    from tinyflow.models import MODELS, get_model

    @dataclass
    class TinyConfig:
        width: int = 3

    MODELS["tiny"] = (TinyConfig, lambda cfg: nn.Linear(2, cfg.width))
    try:
        assert "tiny" in MODELS and get_model("tiny", width=5).weight.shape == (5, 2)
        with pytest.raises(TypeError, match="expected \\(config class, builder\\)"):
            MODELS["bad"] = ("not a class", None)
    finally:
        del MODELS["tiny"]
    assert "tiny" not in MODELS
