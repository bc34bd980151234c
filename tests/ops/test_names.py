"""Where names live: an op (Function) never shares its class name with an nn layer (Module), and
every function of nn.functional is defined in the op family file of its op (F is an index)."""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import tinyflow.nn as nn
import tinyflow.nn.functional as F
import tinyflow.ops as ops
from tinyflow.autograd import Function
from tinyflow.nn.modules.module import Module


def _classes(package, base) -> dict[str, str]:
    """{class name: module} of every subclass of ``base`` defined in the modules of ``package``."""
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, base) and obj.__module__ == module.__name__:
                found[name] = module.__name__
    return found


def test_no_function_shares_its_class_name_with_an_nn_module():
    functions, modules = _classes(ops, Function), _classes(nn.modules, Module)
    assert len(functions) > 40 and len(modules) > 25
    clashes = {name: (functions[name], modules[name]) for name in set(functions) & set(modules)}
    assert not clashes, f"rename the op classes (suffix Function): {clashes}"


def test_every_function_of_F_is_defined_in_an_op_family_file():
    """F.conv2d lives in tinyflow/ops/conv.py beside Conv2dFunction: F itself defines nothing, and
    the ops package's index names the op classes, not F's functions."""
    names = {name: getattr(F, name) for name in dir(F)}
    public = {name: obj for name, obj in names.items() if inspect.isfunction(obj) and not name.startswith("_")}
    assert sorted(public) == sorted(F.__all__)
    homes = {name: obj.__module__ for name, obj in public.items()}
    assert all(home.startswith("tinyflow.ops.") for home in homes.values()), \
        {name: home for name, home in homes.items() if not home.startswith("tinyflow.ops.")}
    assert homes["conv2d"] == "tinyflow.ops.conv" and homes["max_pool2d"] == "tinyflow.ops.pool"
    assert homes["silu"] == homes["relu"] == "tinyflow.ops.activation"  # no *_extra file: one per family
    for name, obj in vars(ops).items():  # the ops index exports Function classes and array helpers only
        assert not (inspect.isfunction(obj) and name in F.__all__), f"ops.{name} duplicates F.{name}"
