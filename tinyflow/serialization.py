"""Checkpoints: ``tf.save(obj, path)`` / ``tf.load(path)`` for model and optimizer state.

A checkpoint is a plain ``.npz`` file: one ``.npy`` member per array (named by its path in the
saved structure, e.g. ``model/fc1.weight``), plus a member ``__tinyflow__.json`` that records the
structure (nested dicts, lists, tuples, numbers, strings, None) and which arrays were Tensors.
Other tools open it with ``numpy.load(path)`` and ``zipfile``; no pickle is involved, so loading
a file cannot run code.

Writes are atomic: the file is written to a temporary file in the same directory, flushed and
fsync'ed, then renamed over ``path`` with ``os.replace``; a crash mid-write leaves the old file.
A write that fails (full disk, read-only directory) raises CheckpointWriteError, an OSError that
says so in one line, and leaves the old file too. A process killed mid-write leaves its hidden
temporary ``.<name>.<host>.<pid>.<random>.tmp`` behind: ``clean_stale_temporaries(directory)``
removes those whose writer is gone.

A file that cannot be read back (truncated, a flipped byte, a malformed manifest) is a
CheckpointError naming the file and what is wrong with it.

Any other object (a whole ``nn.Module``, an optimizer) is pickled, as torch.save does: its
tensors still go to ``.npy`` members, the rest to a ``.pkl`` member. As in PyTorch since 2.6,
``load`` unpickles it with ``weights_only=True`` by default: a restricted unpickler that builds
only containers, numbers, strings, dtypes, devices and the classes and functions the caller has
allowlisted with ``add_safe_globals([...])`` or ``with safe_globals([...]):``; anything else (a
class of the file's choosing, ``os.system``, ``eval``) is refused before it is called. Pass
``weights_only=False`` only for a file you trust (a full unpickle runs code from the file), or
save ``model.state_dict()`` to need neither. A pickle written before a class moved (the files
of issue 34's house, e.g. ``tinyflow.nn.modules.activation_extra.SiLU``) names its old module;
``load`` reads it from where it lives now (``_MOVED_MODULES``), and the allowlist knows it by
that name.

The ``.npy`` format has no bfloat16 (it would come back as anonymous 2-byte ``V2`` records): a
bfloat16 array is stored as its raw ``uint16`` bits with ``"dtype": "bfloat16"`` in its manifest
entry, and viewed back on load. Such checkpoints say format version 2, so that a tinyflow that
predates this refuses them instead of loading integers; all others stay version 1.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import json
import math
import io
import os
import pickle
import re
import secrets
import socket
import stat
import struct
import threading
import time
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import IO, Any, Union

import numpy as np

from tinyflow.device import CPU, Device, device_of, move
from tinyflow.dtypes import bfloat16, is_bfloat16
from tinyflow.tensor import Tensor

__all__ = ["save", "load", "clean_stale_temporaries", "CheckpointError", "CheckpointWriteError", "MANIFEST_NAME",
           "add_safe_globals", "get_safe_globals", "clear_safe_globals", "safe_globals"]

MANIFEST_NAME = "__tinyflow__.json"
FORMAT_NAME = "tinyflow-checkpoint"
FORMAT_VERSION = 2  # the newest this module reads; 2 added bfloat16 arrays stored as raw bits

PathLike = Union[str, os.PathLike]
DeviceLike = Union[str, Device, None]


_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


class CheckpointError(ValueError):
    """A file that is not a (readable) tinyflow checkpoint."""


class CheckpointWriteError(OSError):
    """tf.save could not write the file (full disk, read-only directory, ...); whatever was at the
    path before is left as it was. ``errno`` is that of the failure; ``str()`` is one line."""

    def __str__(self) -> str:
        return str(self.strerror)


# --------------------------------------------------------------------------- safe globals
# What ``load(weights_only=True)`` may build from a pickle, as torch.serialization's allowlist:
# PyTorch's functions and semantics (a process-wide list; ``safe_globals`` adds for a ``with``
# block and restores the list on exit). An entry is a class or function, found in the pickle
# under ``module.qualname``, or a pair ``(obj, "module.name")`` for an object pickled under
# another name (a class that has moved).
SafeGlobal = Union[Callable[..., Any], tuple[Callable[..., Any], str]]

_user_safe_globals: list[SafeGlobal] = []
_safe_globals_lock = threading.Lock()

# The modules whose globals are never built unless allowlisted by name; a file naming one of them
# is refused with PyTorch's "whose module ... is blocked" message.
_BLOCKED_MODULES = frozenset({"sys", "os", "posix", "nt", "subprocess"})


def _default_safe_globals() -> dict[str, Any]:
    """What a whole-object pickle of tinyflow's own types needs beyond containers and numbers
    (PyTorch's default allowlist has the same kind: OrderedDict, devices, dtypes, sets)."""
    import builtins

    from tinyflow.device import Device

    out: dict[str, Any] = {
        "collections.OrderedDict": OrderedDict,
        "builtins.set": builtins.set, "builtins.frozenset": builtins.frozenset,
        "builtins.bytearray": builtins.bytearray, "builtins.complex": builtins.complex,
        "builtins.slice": builtins.slice, "builtins.range": builtins.range,
        "_codecs.encode": __import__("_codecs").encode,  # bytes in pickle protocols 0-2
        "tinyflow.device.Device": Device,
        "numpy.dtype": np.dtype,
    }
    scalar = np.float32(0).__reduce__()[0]  # numpy's scalar constructor, by whatever path it pickles
    for module in (scalar.__module__, "numpy.core.multiarray", "numpy._core.multiarray"):  # numpy 1 and 2 files
        out[f"{module}.{scalar.__name__}"] = scalar
    with contextlib.suppress(TypeError):  # no ml_dtypes: no bfloat16 dtype to allow
        bf16 = bfloat16().type
        out[f"{bf16.__module__}.{bf16.__name__}"] = bf16
    return out


def _global_name(entry: SafeGlobal) -> tuple[str, Any]:
    """``(path, obj)`` for an allowlist entry, checked."""
    if isinstance(entry, tuple):
        if len(entry) != 2 or not isinstance(entry[1], str) or not callable(entry[0]):
            raise TypeError(f"add_safe_globals: a pair must be (class or function, 'module.name'), got {entry!r}")
        return entry[1], entry[0]
    if not callable(entry):
        raise TypeError(f"add_safe_globals: expected classes or functions, got {type(entry).__name__} {entry!r}")
    module, qualname = getattr(entry, "__module__", None), getattr(entry, "__qualname__", None)
    if not module or not qualname:
        raise TypeError(f"add_safe_globals: {entry!r} has no __module__/__qualname__; give a pair (obj, 'module.name')")
    return f"{module}.{qualname}", entry


def add_safe_globals(safe_globals: list[SafeGlobal]) -> None:
    """Mark these classes and functions as safe for ``load(weights_only=True)`` (process-wide), as
    ``torch.serialization.add_safe_globals``: a pickle that names one of them may build it."""
    for entry in safe_globals:
        _global_name(entry)
    with _safe_globals_lock:
        _user_safe_globals.extend(e for e in safe_globals if e not in _user_safe_globals)


def get_safe_globals() -> list[SafeGlobal]:
    """The classes and functions the user has allowlisted (``add_safe_globals``, ``safe_globals``)."""
    with _safe_globals_lock:
        return list(_user_safe_globals)


def clear_safe_globals() -> None:
    """Forget every user-allowlisted global."""
    with _safe_globals_lock:
        _user_safe_globals.clear()


class safe_globals:  # noqa: N801 - PyTorch's name
    """``with safe_globals([Net, nn.Linear]): model = tf.load(path)``: the listed globals are
    allowlisted inside the block only; on exit the allowlist is what it was before."""

    def __init__(self, safe_globals: list[SafeGlobal]) -> None:
        for entry in safe_globals:
            _global_name(entry)
        self.safe_globals = list(safe_globals)
        self._saved: list[SafeGlobal] | None = None

    def __enter__(self) -> None:
        self._saved = get_safe_globals()
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc: Any) -> None:
        with _safe_globals_lock:
            _user_safe_globals[:] = self._saved or []


# Where a pickle written before the house moved into folders (issue 34) finds what it names: each
# old module and the module that exports its public classes and functions now. As torch.load
# reads torch.tensor as torch._tensor (its load_module_mapping), find_class reads an old name
# from its new module. Data for this unpickler only: no import alias, nothing else sees it.
_MOVED_MODULES = {
    "tinyflow.functions": "tinyflow",
    "tinyflow.grad_scaler": "tinyflow.amp",
    **{f"tinyflow.autograd_{name}": "tinyflow.autograd"
       for name in ("function", "grad", "grad_mode", "anomaly_mode", "variable")},
    "tinyflow.autograd_functional": "tinyflow.autograd.functional",
    "tinyflow.nn.init_extra": "tinyflow.nn.init",
    **{f"tinyflow.nn.modules.{family}_extra": f"tinyflow.nn.modules.{family}"
       for family in ("activation", "container", "conv", "dropout", "linear", "loss", "pooling")},
    **{f"tinyflow.nn.functional.{name}": "tinyflow.nn.functional"
       for name in ("activation", "activation_extra", "attention", "conv", "conv_extra", "distance", "dropout",
                    "dropout_extra", "instancenorm", "linear", "linear_extra", "loss", "loss_extra",
                    "normalization", "padding", "pooling", "pooling_extra", "sparse", "vision")},
    **{f"tinyflow.{name}": f"tinyflow.surface.{name}"
       for name in ("tensor_methods", "tensor_methods_layout", "tensor_methods_linalg", "tensor_methods_special",
                    "tensor_methods_stats")},
    "tinyflow.sweep": "tinyflow.recipes.sweep",
}
_LINALG_RESULTS = ("linalg_inv_ex", "linalg_slogdet", "linalg_cholesky_ex", "linalg_qr", "linalg_svd", "linalg_eigh",
                   "linalg_lstsq")
# Result types that moved into tinyflow.return_types, their one home (as torch.return_types).
_MOVED_NAMES = {(module, name): "tinyflow.return_types" for module, names in (
    ("tinyflow.tensor_methods_stats", ("aminmax", "nanmedian", "histogram")),
    ("tinyflow.linalg", _LINALG_RESULTS)) for name in names}
_MOVED_NAMES.update({(module, "NonDynamicallyQuantizableLinear"): "tinyflow.nn.modules.linear"  # torch's home
                     for module in ("tinyflow.nn.modules.activation", "tinyflow.nn.modules.activation_extra")})


def _current_global(module: str, name: str) -> tuple[str, str]:
    """Where ``name`` is defined now, for a pickle that found it in ``module``: its module and
    qualified name of today, which the weights_only allowlist knows it by."""
    moved_to = _MOVED_NAMES.get((module, name)) or _MOVED_MODULES.get(module)
    if moved_to is None:
        return module, name
    obj = getattr(importlib.import_module(moved_to), name, None)  # one of tinyflow's own modules
    if obj is None or not hasattr(obj, "__qualname__"):
        return moved_to, name
    return obj.__module__, obj.__qualname__


def _allowed_globals() -> dict[str, Any]:
    allowed = _default_safe_globals()
    for entry in get_safe_globals():
        path, obj = _global_name(entry)
        allowed[path] = obj
    return allowed


class WeightsOnlyUnpicklingError(pickle.UnpicklingError):
    """``load(weights_only=True)`` met a global that is not allowlisted. ``source`` is the file,
    ``pickled_class`` the class of the pickled object, ``global_name`` the refused global."""

    def __init__(self, message: str, source: str, pickled_class: str, global_name: str) -> None:
        super().__init__(message)
        self.source, self.pickled_class, self.global_name = source, pickled_class, global_name


def _refused_global(source: str, pickled_class: str, path: str, module: str) -> WeightsOnlyUnpicklingError:
    """PyTorch's message for a refused global, on one line."""
    head = (f"Weights only load failed: {source} holds a pickled {pickled_class} (tf.save of a whole object), "
            "and tf.load(weights_only=True) builds only allowlisted classes and functions. ")
    if module.split(".")[0] in _BLOCKED_MODULES:
        why = f"Trying to load unsupported GLOBAL {path} whose module {module} is blocked. "
    else:
        why = (f"Unsupported global: GLOBAL {path} was not an allowed global by default. Please use "
               f"`tinyflow.serialization.add_safe_globals([{path}])` or the "
               f"`tinyflow.serialization.safe_globals([{path}])` context manager to allowlist this global "
               "if you trust this class/function. ")
    tail = ("Re-running tf.load with weights_only=False will likely succeed, but it runs code from the file: do it "
            "only if you got the file from a trusted source; saving model.state_dict() instead needs neither")
    return WeightsOnlyUnpicklingError(head + why + tail, source, pickled_class, path)


# --------------------------------------------------------------------------- save
class _Writer:
    """Turns a nested object into a JSON-able manifest node, collecting its arrays."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.pickles: dict[str, bytes] = {}  # member name -> pickled object (whole modules, ...)
        self.version = 1  # raised to 2 by the first bfloat16 array

    def _array_name(self, path: str) -> str:
        """A readable, unique zip member name from the structure path (``model/fc1.weight``).

        Characters outside ``[A-Za-z0-9._+-]`` become ``_`` and ``.``/``..``/empty segments are
        replaced, so that unzip tools extract every member inside their target directory.
        """
        segments = [_SAFE.sub("_", seg) for seg in (path or "root").split("/")]
        name = "/".join("_" if seg in ("", ".", "..") else seg for seg in segments)
        candidate, n = name, 1
        while candidate in self.arrays or candidate == MANIFEST_NAME:
            candidate, n = f"{name}#{n}", n + 1
        return candidate

    def _array_node(self, arr: Any, path: str, **extra: Any) -> dict[str, Any]:
        device = device_of(arr)
        host = move(arr, CPU) if device != CPU else arr
        host = np.asarray(host)
        if host.dtype.hasobject:
            raise TypeError(
                f"tf.save: array at {path or '<root>'!r} has dtype object, which cannot be saved without pickle"
            )
        if is_bfloat16(host.dtype):
            host = host.view(np.uint16)  # the bits, exactly; the manifest says how to read them
            extra["dtype"] = "bfloat16"
            self.version = 2
        name = self._array_name(path)
        self.arrays[name] = host  # (np.ascontiguousarray would turn 0-d arrays into 1-d)
        return {"type": "array", "name": name, "device": str(device), **extra}

    def node(self, obj: Any, path: str) -> Any:
        where = path or "<root>"
        if isinstance(obj, np.generic):  # before int/float: np.float64 subclasses float
            return self._array_node(np.asarray(obj), path, scalar=True)
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            if math.isfinite(obj):
                return float(obj)
            return {"type": "float", "value": repr(obj)}  # 'nan', 'inf', '-inf'
        if isinstance(obj, Tensor):
            return self._array_node(obj.array, path, tensor=True, requires_grad=bool(obj.requires_grad))
        if isinstance(obj, np.ndarray) or hasattr(obj, "__cuda_array_interface__"):
            return self._array_node(obj, path)
        if isinstance(obj, dict):
            items = []
            for key, value in obj.items():
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    raise TypeError(
                        f"tf.save: dict at {where!r} has key {key!r} of type {type(key).__name__}; "
                        "only str and int keys can be saved"
                    )
                items.append([key, self.node(value, f"{path}/{key}" if path else str(key))])
            return {"type": "dict", "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            items = [self.node(v, f"{path}/{i}" if path else str(i)) for i, v in enumerate(obj)]
            return {"type": kind, "items": items}
        return self._pickle_node(obj, path)

    def _pickle_node(self, obj: Any, path: str) -> dict[str, Any]:
        """Any other object, pickled as torch.save pickles it; its tensors and arrays are stored
        as ``.npy`` members (persistent ids), so the pickle holds only the object's structure."""
        tensors: list[Any] = []
        writer = self

        class _Pickler(pickle.Pickler):
            def persistent_id(self, value: Any) -> Any:
                if isinstance(value, Tensor):
                    kind = "parameter" if type(value).__name__ == "Parameter" else "tensor"
                    node = writer._array_node(value.array, f"{path}/{len(tensors)}", tensor=True,
                                              requires_grad=bool(value.requires_grad))
                elif isinstance(value, np.ndarray) or hasattr(value, "__cuda_array_interface__"):
                    kind, node = "array", writer._array_node(value, f"{path}/{len(tensors)}")
                else:
                    return None
                tensors.append(node)
                return (kind, len(tensors) - 1)

        buffer = io.BytesIO()
        try:
            _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            raise TypeError(
                f"tf.save: cannot pickle {type(obj).__name__} at {path or '<root>'!r} ({exc}); save its "
                "state_dict() instead"
            ) from exc
        name = self._array_name(path) + ".pkl"
        self.pickles[name] = buffer.getvalue()
        return {"type": "pickle", "name": name, "class": f"{type(obj).__module__}.{type(obj).__qualname__}",
                "tensors": tensors}


def _write_npz(fileobj: IO[bytes], manifest: dict[str, Any], arrays: dict[str, np.ndarray],
               pickles: dict[str, bytes]) -> None:
    with zipfile.ZipFile(fileobj, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(MANIFEST_NAME, json.dumps(manifest, indent=1))
        for name, arr in arrays.items():
            with zf.open(name + ".npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)
        for name, data in pickles.items():
            zf.writestr(name, data)


def save(obj: Any, f: Union[PathLike, IO[bytes]], pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True, _disable_byteorder_record: bool = False) -> None:
    """Write ``obj`` (e.g. ``{"model": model.state_dict(), "optim": opt.state_dict()}``) to ``f``, a
    path or a binary file object.

    Tensors on a GPU are copied to the host; ``load`` puts them back on their device. Writing to
    a path is atomic; a binary file object is written in place. Objects other than containers,
    tensors, arrays, numbers and strings (a whole model) are pickled, as by torch.save, and load
    only under an allowlist (``safe_globals``) or with ``weights_only=False``. torch.save's pickling
    arguments (``pickle_module``, ``pickle_protocol``, ...) are accepted and ignored (the pickle
    protocol is the newest).
    """
    path = f
    writer = _Writer()
    root = writer.node(obj, "")
    manifest = {"format": FORMAT_NAME, "version": writer.version, "root": root}
    if hasattr(path, "write"):
        _write_npz(path, manifest, writer.arrays, writer.pickles)  # type: ignore[arg-type]
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise FileNotFoundError(f"tf.save: directory {directory!r} {what} (saving {path!r})")
    # A fresh name in the same directory (so os.replace is an atomic rename on one filesystem);
    # mode 0o666 lets the umask decide the permissions, as for any new file.
    tmp_path = os.path.join(directory, _temporary_name(os.path.basename(path)))
    try:
        fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise _write_error(exc, path, directory, creating=True) from exc
    try:
        with os.fdopen(fd, "wb") as f:
            _write_npz(f, manifest, writer.arrays, writer.pickles)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_path)
        if isinstance(exc, OSError):
            raise _write_error(exc, path, directory) from exc
        raise
    _fsync_directory(directory)


def _write_error(exc: OSError, path: str, directory: str, creating: bool = False) -> CheckpointWriteError:
    """One line: what failed, that the previous file is unchanged, and what to do."""
    reason = exc.strerror or str(exc)
    kept = f"the previous {path!r} is unchanged" if os.path.exists(path) else f"{path!r} was not written"
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        message = (f"tf.save: no space left in {directory!r} ({reason}) while writing {path!r}; {kept}. "
                   "Free some space or save to another directory")
    elif creating and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        message = (f"tf.save: cannot create files in {directory!r} ({reason}); {kept}. "
                   "Save to a writable directory")
    else:
        message = f"tf.save: could not write {path!r} ({type(exc).__name__}: {reason}); {kept}"
    return CheckpointWriteError(exc.errno, message)


# The temporary files of save(): hidden, next to their target, and tagged with the host and the
# process that writes them, so that clean_stale_temporaries can tell a dead writer's from a live one's.
_TEMPORARY = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>[0-9]+)\.[0-9a-f]{12}\.tmp$")
_UNTAGGED_TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{12}\.tmp$")  # written by tinyflow before the tags


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:32] or "host"


def _temporary_name(basename: str) -> str:
    return f".{basename[:100]}.{_host_tag()}.{os.getpid()}.{secrets.token_hex(6)}.tmp"


def _process_running(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (True when that cannot be told)."""
    if pid == os.getpid() or os.name == "nt":  # on Windows os.kill(pid, 0) would end the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OverflowError, ValueError):
        return False  # no such pid can exist
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def clean_stale_temporaries(directory: PathLike, max_age: float = 3600.0) -> list[str]:
    """Remove the temporaries that tf.save left in ``directory`` when its process was killed.

    A temporary is stale when the process named in it (on this host) no longer runs, or when it
    has not been written to for ``max_age`` seconds (a writer on another host, a reused pid, or a
    temporary from a tinyflow that did not tag them). The temporaries of this process and of live
    writers are kept, and nothing else in the directory is touched. Returns the paths removed.
    """
    directory = os.fspath(directory)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    host, now, removed = _host_tag(), time.time(), []
    for name in names:
        tagged = _TEMPORARY.match(name)
        if tagged is None and not _UNTAGGED_TEMPORARY.match(name):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if tagged is not None and int(tagged["pid"]) == os.getpid() and tagged["host"] == host:
            continue  # ours: a save in progress in another thread
        writer_gone = tagged is not None and tagged["host"] == host and not _process_running(int(tagged["pid"]))
        if writer_gone or now - st.st_mtime > max_age:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                removed.append(path)
    return removed


def _fsync_directory(directory: str) -> None:
    """Make the rename durable (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- load
# What opening a damaged zip or reading a damaged member raises: a bad CRC or header (BadZipFile),
# a size that runs past the end (EOFError, struct.error, ValueError from read_array), an offset
# before the start (OSError EINVAL from seek), a flipped compression method or flag
# (NotImplementedError, RuntimeError "encrypted"), bad compressed data (zlib.error).
_DAMAGE = (zipfile.BadZipFile, EOFError, struct.error, ValueError, OverflowError, NotImplementedError,
           RuntimeError, zlib.error, UnicodeDecodeError)


@contextlib.contextmanager
def _read_errors_as_damage(source: str) -> Iterator[None]:
    """Around the reads of the zip file only, so that other errors keep their own type."""
    try:
        yield
    except CheckpointError:
        raise
    except _DAMAGE as exc:
        raise _damaged(source, exc) from exc
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # a real I/O error (EIO, EACCES) is not damage
            raise
        raise _damaged(source, exc) from exc


# What walking a manifest of the wrong shape raises (a missing key, a list where a dict belongs, a
# pair that is not a pair, a float that is not a number, ...).
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError)


def _damaged(source: str, exc: BaseException) -> CheckpointError:
    return CheckpointError(
        f"tf.load: {source} is damaged and cannot be read ({type(exc).__name__}: {exc}); load another "
        "checkpoint (an earlier copy, or best.ckpt beside last.ckpt)"
    )


class _Reader:
    def __init__(self, zf: zipfile.ZipFile, source: str, map_location: Any, weights_only: bool) -> None:
        self.zf = zf
        self.source = source
        self.map_location = map_location
        self.weights_only = weights_only
        self.members = set(zf.namelist())

    def _unpickle(self, node: dict[str, Any]) -> Any:
        """A pickled object (tf.save of a whole model). With weights_only (the default) only the
        allowlisted globals are built (``safe_globals``); weights_only=False unpickles it all."""
        if node["name"] not in self.members:
            raise CheckpointError(f"tf.load: {self.source} is damaged: its pickle {node['name']!r} is missing")
        tensors = node["tensors"]
        reader = self
        pickled_class = node.get("class", "object")
        allowed = _allowed_globals() if self.weights_only else None

        class _Unpickler(pickle.Unpickler):
            def persistent_load(self, pid: Any) -> Any:
                kind, index = pid
                value = reader._array(tensors[index])
                if kind == "parameter":
                    from tinyflow.nn.parameter import Parameter

                    p = Parameter._from_array(value.array, device=value.device)
                    p.requires_grad = value.requires_grad
                    return p
                return value

            def find_class(self, module: str, name: str) -> Any:
                module, name = _current_global(module, name)
                if allowed is None:
                    return super().find_class(module, name)
                path = f"{module}.{name}"
                if path not in allowed:  # refused before anything of the file's choosing is called
                    raise _refused_global(reader.source, pickled_class, path, module)
                return allowed[path]

        with _read_errors_as_damage(f"{self.source} (pickle {node['name']!r})"):
            data = self.zf.read(node["name"])
        return _Unpickler(io.BytesIO(data)).load()

    def _place(self, arr: np.ndarray, saved: str, tensor: bool) -> Any:
        """``arr`` (read on the host) where ``map_location`` sends what was saved on ``saved``:
        PyTorch's forms: None (back where it was), a device or its name, a dict from saved
        location to device, or a callable ``f(storage, location)`` given the host tensor."""
        where = self.map_location
        if callable(where) and not isinstance(where, (str, Device)):
            host = Tensor._from_array(arr, device=CPU)
            out = where(host, saved)
            if out is None:
                out = host
            if isinstance(out, (str, Device)):
                out = host.to(Device(out))
            if not isinstance(out, Tensor):
                raise TypeError(
                    f"tf.load: map_location returned {type(out).__name__}; it must return the tensor it was "
                    "given, moved or not (e.g. lambda storage, loc: storage), a device, or None"
                )
            return out if tensor else out.array
        if isinstance(where, dict):
            where = where.get(saved, saved)
        device = Device(saved) if where is None else _as_device(where)
        if device != CPU:
            arr = move(arr, device)
        return Tensor._from_array(arr, device=device) if tensor else arr

    def _array(self, node: dict[str, Any]) -> Any:
        member = node["name"] + ".npy"
        if member not in self.members:
            raise CheckpointError(
                f"tf.load: {self.source} is damaged: its manifest names array {node['name']!r}, which is missing"
            )
        with _read_errors_as_damage(f"{self.source} (array {node['name']!r})"), self.zf.open(member) as f:
            arr = np.lib.format.read_array(f, allow_pickle=False)
        if node.get("dtype") == "bfloat16":
            if arr.dtype != np.uint16:
                raise CheckpointError(
                    f"tf.load: {self.source} is damaged: bfloat16 array {node['name']!r} is stored "
                    f"as {arr.dtype}, not as its uint16 bits"
                )
            arr = arr.view(bfloat16())  # raises a TypeError naming ml_dtypes when it is missing
        if node.get("scalar"):
            return arr[()]
        out = self._place(arr, node.get("device", "cpu"), bool(node.get("tensor")))  # fresh: no copy
        if node.get("tensor"):
            out.requires_grad = bool(node.get("requires_grad", False))
        return out

    def value(self, node: Any) -> Any:
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind == "dict":
            return {key: self.value(v) for key, v in node["items"]}
        if kind == "list":
            return [self.value(v) for v in node["items"]]
        if kind == "tuple":
            return tuple(self.value(v) for v in node["items"])
        if kind == "float":
            return float(node["value"])
        if kind == "array":
            return self._array(node)
        if kind == "pickle":
            return self._unpickle(node)
        raise CheckpointError(f"tf.load: {self.source} has an unknown manifest entry of type {kind!r}")


def _as_device(where: Any) -> Device:
    if isinstance(where, int) and not isinstance(where, bool):
        return Device("cuda", where)  # torch.load(map_location=0) means cuda:0
    try:
        return Device(where)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"tf.load: map_location {where!r} is not a device; give None, 'cpu', 'cuda:N', a tinyflow "
            "device, a dict {saved: device} or a callable (storage, location) -> storage"
        ) from exc


def load(f: Union[PathLike, IO[bytes]], map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool | None = None, mmap: bool | None = None, **pickle_load_args: Any) -> Any:
    """Read a checkpoint written by ``tf.save`` from ``f``, a path or a binary file object.

    ``map_location`` as in torch.load: None puts every Tensor back on the device it was saved
    from; a device (``"cpu"``, ``"cuda:0"``, ``tf.device(...)``) puts all of them there; a dict maps
    saved locations to devices (``{"cuda:0": "cpu"}``); a callable ``f(storage, location)`` gets
    each tensor on the host with its saved location and returns it, moved or not.
    ``weights_only`` as in PyTorch 2.6+: unless it is False, a pickled object in the file (tf.save of
    a whole model) is unpickled with only the allowlisted globals (``safe_globals``,
    ``add_safe_globals``); any other global is refused with an ``UnpicklingError`` before it is
    called, since unpickling runs code. The data of a state dict never needs a pickle. ``mmap``, ``pickle_module`` and ``encoding`` are accepted and ignored.
    A file that is not a tinyflow checkpoint, or one that is damaged (truncated, a changed byte, a
    malformed manifest), is a CheckpointError that names the file and says what is wrong with it.
    """
    path = f
    unknown = sorted(set(pickle_load_args) - {"encoding"})
    if unknown:
        raise TypeError(f"tf.load: unexpected keyword arguments {unknown}")
    device = map_location
    if isinstance(map_location, dict):
        device = {str(Device(k)) if isinstance(k, Device) else k: v for k, v in map_location.items()}
    elif map_location is not None and not callable(map_location):
        device = _as_device(map_location)
    source = repr(os.fspath(path)) if not hasattr(path, "read") else "the given file object"
    if not hasattr(path, "read") and not os.path.exists(path):  # type: ignore[arg-type]
        raise FileNotFoundError(f"tf.load: no such file {source}")
    if not zipfile.is_zipfile(path):  # type: ignore[arg-type]
        raise CheckpointError(_not_a_zip(path, source))
    with _read_errors_as_damage(source):
        zf = zipfile.ZipFile(path)  # type: ignore[arg-type]
    with zf:
        manifest = _read_manifest(zf, source, _begins_as_checkpoint(path))
        if manifest["version"] >= 2:
            bfloat16()  # bfloat16 arrays ahead: a TypeError naming ml_dtypes when it is missing
        try:
            return _Reader(zf, source, device, weights_only is not False).value(manifest["root"])
        except CheckpointError:
            raise
        except _MALFORMED as exc:
            raise CheckpointError(
                f"tf.load: {source} has a malformed manifest ({MANIFEST_NAME}: {type(exc).__name__}: {exc}); the "
                "file is damaged or was not written by tf.save: load another checkpoint"
            ) from exc


def _read_manifest(zf: zipfile.ZipFile, source: str, begins_as_checkpoint: bool) -> dict[str, Any]:
    """The parsed, checked ``__tinyflow__.json`` of an open checkpoint."""
    names = zf.namelist()
    if MANIFEST_NAME not in names:
        if begins_as_checkpoint:  # the manifest is there, its entry in the zip directory is not
            raise _damaged(source, zipfile.BadZipFile(f"the zip directory has no entry {MANIFEST_NAME}"))
        if any(name.endswith("data.pkl") for name in names):
            raise CheckpointError(
                f"tf.load: {source} looks like a PyTorch checkpoint (torch.save), not a tinyflow "
                "one; read it with torch.load and pass {name: tensor.numpy()} to "
                "Module.load_state_dict"
            )
        raise CheckpointError(
            f"tf.load: {source} is a zip/.npz file but not a tinyflow checkpoint (it has no "
            f"{MANIFEST_NAME}); open plain .npz files with numpy.load"
        )
    with _read_errors_as_damage(source):
        raw = zf.read(MANIFEST_NAME)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CheckpointError(f"tf.load: {source} has an unreadable manifest ({MANIFEST_NAME}): {e}") from e
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise CheckpointError(f"tf.load: {source} is not a tinyflow checkpoint (unknown manifest format)")
    version = manifest.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(
            f"tf.load: {source} is checkpoint format version {version}; this tinyflow reads "
            f"versions up to {FORMAT_VERSION} (upgrade tinyflow)"
        )
    if "root" not in manifest:
        raise CheckpointError(f"tf.load: {source} has a malformed manifest ({MANIFEST_NAME} has no 'root'); "
                              "the file is damaged or was not written by tf.save: load another checkpoint")
    return manifest


_ZIP_LOCAL_HEADER = b"PK\x03\x04"


def _begins_as_checkpoint(path: Union[PathLike, IO[bytes]]) -> bool:
    """Whether the file starts as tf.save writes it: the zip entry of the manifest comes first
    (its name follows the 30-byte local header of the first member)."""
    head, _ = _head(path, 30 + len(MANIFEST_NAME))
    return head.startswith(_ZIP_LOCAL_HEADER) and head[30:] == MANIFEST_NAME.encode()


def _not_a_zip(path: Union[PathLike, IO[bytes]], source: str) -> str:
    """Why a file that zipfile cannot open is not a checkpoint: empty, truncated, or something else."""
    head, size = _head(path, len(_ZIP_LOCAL_HEADER))
    if size == 0:
        return f"tf.load: {source} is empty (0 bytes), not a checkpoint; load another checkpoint"
    if head.startswith(_ZIP_LOCAL_HEADER):
        what = "a tinyflow checkpoint" if _begins_as_checkpoint(path) else "a zip/.npz file"
        return (f"tf.load: {source} is truncated: it begins as {what} but its end-of-archive record is missing "
                f"({size} bytes; a copy or download cut short?); copy it again or load another checkpoint")
    return (f"tf.load: {source} is not a tinyflow checkpoint (not an .npz/zip file); "
            "tf.load reads files written by tf.save")


def _head(path: Union[PathLike, IO[bytes]], n: int) -> tuple[bytes, int]:
    """The first ``n`` bytes of a path or a seekable binary file object, and its size."""
    if hasattr(path, "read"):
        f = path  # type: ignore[assignment]
        where = f.tell()  # type: ignore[union-attr]
        try:
            f.seek(0, os.SEEK_END)  # type: ignore[union-attr]
            size = f.tell()  # type: ignore[union-attr]
            f.seek(0)  # type: ignore[union-attr]
            return f.read(n), size  # type: ignore[union-attr,return-value]
        finally:
            f.seek(where)  # type: ignore[union-attr]
    with open(path, "rb") as f:
        return f.read(n), os.fstat(f.fileno()).st_size
