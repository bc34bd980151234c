"""nn, nn.functional, nn.utils, optim and the model zoo load only what a program uses (issue 25):
a layer file, an F family, an optimizer other than SGD, the schedulers and a model's file load on
first use, and every public name still resolves (attribute, ``from ... import``, ``dir``, star
import)."""
from __future__ import annotations


def test_an_alexnet_step_loads_no_surface_layer_optimizer_or_other_model(fresh_python):
    out = fresh_python(
        "import numpy as np, sys\n"
        "import tinyflow\n"
        "import tinyflow.nn.functional as F\n"
        "import tinyflow.optim as optim\n"
        "from tinyflow.models import get_model\n"
        "model = get_model('alexnet', num_classes=10)\n"
        "opt = optim.SGD(list(model.parameters()), lr=0.01, momentum=0.9)\n"
        "x = tinyflow.tensor(np.zeros((2, 3, 64, 64), np.float32))\n"
        "F.cross_entropy(model(x), tinyflow.tensor(np.array([1, 2]))).backward()\n"
        "opt.step()\n"
        "out = sorted(m for m in sys.modules if m.startswith(('tinyflow.nn', 'tinyflow.optim', 'tinyflow.models')))\n")
    loaded = set(out)
    unused = {f"tinyflow.nn.modules.{f}" for f in ("transformer", "padding", "upsampling", "fold", "pixelshuffle",
                                                   "distance", "instancenorm", "channelshuffle", "rnn", "sparse",
                                                   "loss", "batchnorm", "normalization", "flatten")}
    unused |= {f"tinyflow.nn.functional.{f}" for f in ("vision", "instancenorm", "attention", "sparse", "distance",
                                                       "normalization", "padding")}
    extras = ("conv", "pooling", "dropout", "linear", "activation", "loss")
    unused |= {f"tinyflow.nn.{p}.{f}_extra" for p in ("modules", "functional") for f in extras}
    unused |= {"tinyflow.nn.modules.container_extra", "tinyflow.nn.modules.hooks", "tinyflow.nn.init_extra"}
    unused |= {"tinyflow.nn.parallel", "tinyflow.nn.utils", "tinyflow.optim.adam", "tinyflow.optim.lr_scheduler",
               "tinyflow.optim.swa_utils", "tinyflow.optim.lbfgs", "tinyflow.optim.clip_grad",
               "tinyflow.models.resnet", "tinyflow.models.fcn", "tinyflow.models.lstm_lm"}
    assert not unused & loaded, f"one AlexNet step loaded what it does not use: {sorted(unused & loaded)}"
    used = {"tinyflow.models.alexnet", "tinyflow.optim.sgd", "tinyflow.nn.modules.conv", "tinyflow.nn.modules.container",
            "tinyflow.nn.modules.pooling", "tinyflow.nn.functional.loss", "tinyflow.nn.functional.conv"}
    assert used <= loaded, sorted(used - loaded)


def test_lazy_names_resolve_by_attribute_import_dir_and_star(fresh_python):
    out = fresh_python(
        "import tinyflow.nn as nn, tinyflow.nn.functional as F, tinyflow.optim as optim, tinyflow.models as models\n"
        "import tinyflow.nn.modules.transformer as T\n"
        "from tinyflow.nn import Transformer, ZeroPad2d\n"
        "from tinyflow.nn.utils import parametrize, rnn\n"
        "from tinyflow.optim.lr_scheduler import StepLR\n"
        "import tinyflow.nn.utils.parametrizations  # imports what nn.utils.weight_norm's file holds too\n"
        "ns = {}\n"
        "exec('from tinyflow.nn import *', ns)\n"
        "fs = {}\n"
        "exec('from tinyflow.nn.functional import *', fs)\n"
        "os_ = {}\n"
        "exec('from tinyflow.optim import *', os_)\n"
        "out = {\n"
        "    'transformer': nn.Transformer is T.Transformer is Transformer is nn.modules.Transformer,\n"
        "    'pad': ZeroPad2d is nn.modules.padding.ZeroPad2d,\n"
        "    'dir': all(n in dir(nn) for n in ('Transformer', 'Conv2d', 'DataParallel', 'utils', 'parallel')),\n"
        "    'dir_f': 'interpolate' in dir(F) and 'relu' in dir(F),\n"
        "    'star': all(n in ns for n in ('Transformer', 'Linear', 'Upsample', 'Module', 'Parameter')),\n"
        "    'star_f': all(n in fs for n in ('interpolate', 'instance_norm', 'relu', 'cross_entropy')),\n"
        "    'star_optim': all(n in os_ for n in ('Adam', 'StepLR', 'lr_scheduler', 'swa_utils')),\n"
        "    'f': callable(F.interpolate) and callable(F.linear) and callable(F.dropout),\n"
        "    'utils': callable(nn.utils.weight_norm) and callable(nn.utils.clip_grad_norm_)\n"
        "             and nn.utils.parametrize is parametrize and nn.utils.rnn is rnn,\n"
        "    'parallel': nn.DataParallel is nn.parallel.DataParallel,\n"
        "    'optim': optim.lr_scheduler.StepLR is StepLR and optim.Adam.__name__ == 'Adam',\n"
        "    'models': models.ResNet.__name__ == 'ResNet' and models.MODELS['resnet20'][1].__name__ == 'ResNetCifar'\n"
        "              and sorted(models.MODELS) == sorted(set(models.MODELS)) and 'lstm-lm' in models.MODELS,\n"
        "}\n")
    assert all(out.values()), {k: v for k, v in out.items() if not v}


def test_unknown_names_are_attribute_errors():
    import pytest

    import tinyflow.models as models
    import tinyflow.nn as nn
    import tinyflow.nn.functional as F
    import tinyflow.optim as optim

    for module, name in ((nn, "NoSuchLayer"), (nn.modules, "NoSuchLayer"), (F, "no_such_function"),
                         (optim, "NoSuchOptimizer"), (models, "NoSuchModel"), (nn.utils, "no_such_util")):
        with pytest.raises(AttributeError, match=name):
            getattr(module, name)


def test_the_files_layers_lived_in_before_nn_modules_still_lead_there():
    """A model pickled when the layers were tinyflow/nn/<file>.py names its classes by those modules."""
    import pickle

    import tinyflow.nn as nn

    old = pickle.dumps(nn.Sequential, protocol=0).replace(b"tinyflow.nn.modules.container", b"tinyflow.nn.container")
    assert b"ctinyflow.nn.container\n" in old and pickle.loads(old) is nn.Sequential
    from tinyflow.nn.conv import Conv2d  # noqa: PLC0415

    assert Conv2d is nn.Conv2d


def test_star_import_of_a_torch_module_path_gives_its_extra_layers_too():
    namespace: dict = {}
    exec("from tinyflow.nn.modules.activation import *", namespace)
    assert {"ReLU", "ELU", "Mish", "MultiheadAttention"} <= set(namespace)
    namespace = {}
    exec("from tinyflow.nn.modules.loss import *", namespace)
    assert {"CrossEntropyLoss", "HuberLoss", "TripletMarginLoss"} <= set(namespace)


def test_the_surface_layers_beside_the_framework_files_resolve_by_their_torch_paths():
    """Conv1d, MaxPool3d, Dropout2d, Bilinear, ParameterList, orthogonal_, ... live in *_extra.py files
    (the PyTorch surface); their PyTorch module paths, tinyflow.nn, F, star imports and pickles find them."""
    import pickle

    import tinyflow
    import tinyflow.nn as nn
    import tinyflow.nn.functional as F
    from tinyflow.nn import init
    from tinyflow.nn.modules import container, conv, dropout, linear, pooling

    pairs = [(conv.Conv1d, nn.Conv1d), (conv.ConvTranspose3d, nn.ConvTranspose3d), (pooling.MaxPool3d, nn.MaxPool3d),
             (pooling.MaxUnpool2d, nn.MaxUnpool2d), (pooling.LPPool2d, nn.LPPool2d), (dropout.Dropout2d, nn.Dropout2d),
             (dropout.AlphaDropout, nn.AlphaDropout), (linear.Bilinear, nn.Bilinear),
             (container.ParameterList, nn.ParameterList), (container.ParameterDict, nn.ParameterDict)]
    for a, b in pairs:
        assert a is b and a.__module__.endswith("_extra"), (a, b)
    for name in ("Conv1d", "Conv3d", "MaxPool1d", "AdaptiveAvgPool3d", "MaxUnpool1d", "Dropout3d", "Bilinear",
                 "ParameterDict"):
        assert name in nn.modules.__all__ and name in dir(nn)
    namespace: dict = {}
    exec("from tinyflow.nn.modules.conv import *", namespace)
    assert {"Conv2d", "Conv1d", "ConvTranspose3d"} <= set(namespace)
    namespace = {}
    exec("from tinyflow.nn.modules.pooling import *", namespace)
    assert {"MaxPool2d", "MaxPool1d", "LPPool3d", "MaxUnpool2d"} <= set(namespace)
    for name in ("conv1d", "conv3d", "conv_transpose1d", "max_pool1d", "avg_pool3d", "lp_pool2d", "max_unpool2d",
                 "dropout2d", "alpha_dropout", "bilinear"):
        assert callable(getattr(F, name)) and name in F.__all__, name
    assert callable(init.orthogonal_) and callable(init.trunc_normal_) and "dirac_" in init.__all__
    x = tinyflow.randn(2, 3, 8)
    layer = nn.Sequential(nn.Conv1d(3, 4, 3), nn.MaxPool1d(2), nn.Dropout1d(0.5))
    layer.eval()
    again = pickle.loads(pickle.dumps(layer))
    assert type(again[0]) is nn.Conv1d and again(x).shape == layer(x).shape == (2, 4, 3)
    bil = nn.Bilinear(3, 5, 2)
    assert bil(tinyflow.randn(4, 3), tinyflow.randn(4, 5)).shape == (4, 2)
    w = tinyflow.empty(4, 4)
    init.orthogonal_(w)
    assert abs(float((w @ w.T - tinyflow.eye(4)).abs().max().item())) < 1e-5


def test_a_module_with_a_backward_hook_loads_the_hook_plumbing_and_runs_it(fresh_python):
    out = fresh_python(
        "import sys, tinyflow, tinyflow.nn as nn\n"
        "m = nn.Linear(3, 2)\n"
        "before = 'tinyflow.nn.modules.hooks' in sys.modules\n"
        "seen = []\n"
        "m.register_full_backward_hook(lambda mod, gin, gout: seen.append((gin[0].shape, gout[0].shape)))\n"
        "m(tinyflow.randn(4, 3, requires_grad=True)).sum().backward()\n"
        "out = {'before': before, 'after': 'tinyflow.nn.modules.hooks' in sys.modules,\n"
        "       'seen': [[list(a), list(b)] for a, b in seen]}\n")
    assert out == {"before": False, "after": True, "seen": [[[4, 3], [4, 2]]]}
