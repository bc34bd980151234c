"""Where names live: an op (Function) never shares its class name with an nn layer (Module), and
every function of nn.functional is defined there (the ops hold only the Function classes)."""
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


def test_every_function_of_F_is_defined_in_nn_functional():
    names = {name: getattr(F, name) for name in dir(F)}  # dir(F) names the lazily loaded surface too
    public = {name: obj for name, obj in names.items() if inspect.isfunction(obj) and not name.startswith("_")
              and obj.__module__.startswith(F.__name__ + ".")}  # one of the family files of the F package
    assert sorted(public) == sorted(F.__all__)
    for name, obj in vars(ops).items():  # the ops export Function classes and array helpers only
        assert not (inspect.isfunction(obj) and name in F.__all__), f"ops.{name} duplicates F.{name}"
