"""The public paths of nn, nn.functional, nn.utils, optim and the model zoo: every name resolves by
attribute, ``from ... import``, ``dir`` and star import; nn.functional is one index module whose
functions live in the op family files (tinyflow/ops/<family>.py); a layer family is one file at
its PyTorch path (no ``*_extra`` files)."""
from __future__ import annotations


def test_public_names_resolve_by_attribute_import_dir_and_star(fresh_python):
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


def test_nn_functional_is_one_index_module_of_the_op_family_functions():
    """F is a module, not a package: each function is the op file's own object (``F.conv2d`` is
    tinyflow/ops/conv.py's, beside Conv2dFunction), F.REDUCTIONS is reachable and not exported,
    and a pickled F function names its family file."""
    import pickle

    import tinyflow.nn.functional as F
    import tinyflow.ops as ops
    from tinyflow.nn.functional import conv2d, cross_entropy, relu, silu
    from tinyflow.ops import activation, conv, loss

    assert not hasattr(F, "__path__") and F.__file__.endswith("functional.py")
    assert conv2d is F.conv2d is conv.conv2d and relu is activation.relu and silu is activation.silu
    assert cross_entropy is loss.cross_entropy and F.REDUCTIONS == ("mean", "sum", "none")
    assert "REDUCTIONS" not in F.__all__ and len(F.__all__) == len(set(F.__all__)) > 100
    assert pickle.loads(pickle.dumps(F.max_pool2d)) is F.max_pool2d
    assert b"tinyflow.ops.pool" in pickle.dumps(F.max_pool2d)
    assert ops.Conv2dFunction is conv.Conv2dFunction and ops.MaxUnpool2dFunction.__module__ == "tinyflow.ops.pool"


def test_star_import_of_a_torch_module_path_gives_the_whole_family():
    namespace: dict = {}
    exec("from tinyflow.nn.modules.activation import *", namespace)
    assert {"ReLU", "ELU", "Mish", "MultiheadAttention"} <= set(namespace)
    namespace = {}
    exec("from tinyflow.nn.modules.loss import *", namespace)
    assert {"CrossEntropyLoss", "HuberLoss", "TripletMarginLoss"} <= set(namespace)


def test_every_layer_lives_in_its_family_file_at_its_torch_path():
    """Conv1d, MaxPool3d, Dropout2d, Bilinear, ParameterList, orthogonal_, ... live in their family's
    file (nn/modules/conv.py holds Conv1d beside Conv2d); their PyTorch module paths, tinyflow.nn,
    F, star imports and pickles find them."""
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
        assert a is b and a.__module__ == f"tinyflow.nn.modules.{a.__module__.rsplit('.', 1)[1]}", (a, b)
        assert not a.__module__.endswith("_extra")
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


def test_a_module_with_a_backward_hook_runs_it(fresh_python):
    out = fresh_python(
        "import tinyflow, tinyflow.nn as nn\n"
        "m = nn.Linear(3, 2)\n"
        "seen = []\n"
        "m.register_full_backward_hook(lambda mod, gin, gout: seen.append((gin[0].shape, gout[0].shape)))\n"
        "m(tinyflow.randn(4, 3, requires_grad=True)).sum().backward()\n"
        "out = {'seen': [[list(a), list(b)] for a, b in seen]}\n")
    assert out == {"seen": [[[4, 3], [4, 2]]]}
