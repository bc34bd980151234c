"""Checkpoints: ``tf.save(obj, path)`` / ``tf.load(path)`` for model and optimizer state.

A checkpoint is a plain ``.npz`` file: one ``.npy`` member per array (named by its path in the
saved structure, e.g. ``model/fc1.weight``), plus a member ``__tinyflow__.json`` that records the
structure (nested dicts, lists, tuples, numbers, strings, None) and which arrays were Tensors.
Other tools open it with ``numpy.load(path)`` and ``zipfile``; no pickle is involved, so loading
a file cannot run code.

Writes are atomic: the file is written to a temporary file in the same directory, flushed and
fsync'ed, then renamed over ``path`` with ``os.replace``; a crash mid-write leaves the old file.

The ``.npy`` format has no bfloat16 (it would come back as anonymous 2-byte ``V2`` records): a
bfloat16 array is stored as its raw ``uint16`` bits with ``"dtype": "bfloat16"`` in its manifest
entry, and viewed back on load. Such checkpoints say format version 2, so that a tinyflow that
predates this refuses them instead of loading integers; all others stay version 1.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
import zipfile
from typing import IO, Any, Union

import numpy as np

from tinyflow.device import CPU, Device, device_of, move
from tinyflow.dtypes import bfloat16, is_bfloat16
from tinyflow.tensor import Tensor

__all__ = ["save", "load", "CheckpointError", "MANIFEST_NAME"]

MANIFEST_NAME = "__tinyflow__.json"
FORMAT_NAME = "tinyflow-checkpoint"
FORMAT_VERSION = 2  # the newest this module reads; 2 added bfloat16 arrays stored as raw bits

PathLike = Union[str, os.PathLike]
DeviceLike = Union[str, Device, None]


_SAFE = re.compile(r"[^A-Za-z0-9._+-]")


class CheckpointError(ValueError):
    """A file that is not a (readable) tinyflow checkpoint."""


# --------------------------------------------------------------------------- save
class _Writer:
    """Turns a nested object into a JSON-able manifest node, collecting its arrays."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
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
            return self._array_node(obj.data, path, tensor=True, requires_grad=bool(obj.requires_grad))
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
        hint = ""
        if hasattr(obj, "state_dict"):
            hint = "; save its state instead: tf.save(obj.state_dict(), path)"
        raise TypeError(
            f"tf.save: cannot save {type(obj).__name__} at {where!r}: a checkpoint holds nested "
            f"dicts/lists/tuples of Tensors, arrays, numbers, strings and None{hint}"
        )


def _write_npz(fileobj: IO[bytes], manifest: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    with zipfile.ZipFile(fileobj, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        zf.writestr(MANIFEST_NAME, json.dumps(manifest, indent=1))
        for name, arr in arrays.items():
            with zf.open(name + ".npy", mode="w", force_zip64=True) as member:
                np.lib.format.write_array(member, arr, allow_pickle=False)


def save(obj: Any, path: Union[PathLike, IO[bytes]]) -> None:
    """Write ``obj`` (e.g. ``{"model": model.state_dict(), "optim": opt.state_dict()}``) to ``path``.

    Tensors on a GPU are copied to the host; ``load`` puts them back on their device. Writing to
    a path is atomic; a binary file object is written in place.
    """
    writer = _Writer()
    root = writer.node(obj, "")
    manifest = {"format": FORMAT_NAME, "version": writer.version, "root": root}
    if hasattr(path, "write"):
        _write_npz(path, manifest, writer.arrays)  # type: ignore[arg-type]
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"tf.save: directory {directory!r} does not exist (saving {path!r})")
    # A fresh name in the same directory (so os.replace is an atomic rename on one filesystem);
    # mode 0o666 lets the umask decide the permissions, as for any new file.
    tmp_path = os.path.join(directory, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            _write_npz(f, manifest, writer.arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


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
class _Reader:
    def __init__(self, zf: zipfile.ZipFile, source: str, map_location: Device | None) -> None:
        self.zf = zf
        self.source = source
        self.map_location = map_location
        self.members = set(zf.namelist())

    def _array(self, node: dict[str, Any]) -> Any:
        member = node["name"] + ".npy"
        if member not in self.members:
            raise CheckpointError(
                f"tf.load: {self.source} is damaged: its manifest names array {node['name']!r}, which is missing"
            )
        with self.zf.open(member) as f:
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
        device = self.map_location if self.map_location is not None else Device(node.get("device", "cpu"))
        if device != CPU:
            arr = move(arr, device)
        if node.get("tensor"):
            t = Tensor._from_array(arr, device=device)  # arr is freshly read: no copy needed
            t.requires_grad = bool(node.get("requires_grad", False))
            return t
        return arr

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
        raise CheckpointError(f"tf.load: {self.source} has an unknown manifest entry of type {kind!r}")


def load(path: Union[PathLike, IO[bytes]], map_location: DeviceLike = None) -> Any:
    """Read a checkpoint written by ``tf.save``.

    ``map_location=None`` puts every Tensor back on the device it was saved from; a device
    (``"cpu"``, ``"cuda:0"``) puts all of them there.
    """
    device = Device(map_location) if map_location is not None else None
    source = repr(os.fspath(path)) if not hasattr(path, "read") else "the given file object"
    if not hasattr(path, "read") and not os.path.exists(path):  # type: ignore[arg-type]
        raise FileNotFoundError(f"tf.load: no such file {source}")
    if not zipfile.is_zipfile(path):  # type: ignore[arg-type]
        raise CheckpointError(
            f"tf.load: {source} is not a tinyflow checkpoint (not an .npz/zip file); "
            "tf.load reads files written by tf.save"
        )
    with zipfile.ZipFile(path) as zf:  # type: ignore[arg-type]
        if MANIFEST_NAME not in zf.namelist():
            if any(name.endswith("data.pkl") for name in zf.namelist()):
                raise CheckpointError(
                    f"tf.load: {source} looks like a PyTorch checkpoint (torch.save), not a tinyflow "
                    "one; read it with torch.load and pass {name: tensor.numpy()} to "
                    "Module.load_state_dict"
                )
            raise CheckpointError(
                f"tf.load: {source} is a zip/.npz file but not a tinyflow checkpoint (it has no "
                f"{MANIFEST_NAME}); open plain .npz files with numpy.load"
            )
        try:
            manifest = json.loads(zf.read(MANIFEST_NAME).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"tf.load: {source} has an unreadable manifest: {e}") from e
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
            raise CheckpointError(f"tf.load: {source} is not a tinyflow checkpoint (unknown manifest format)")
        version = manifest.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise CheckpointError(
                f"tf.load: {source} is checkpoint format version {version}; this tinyflow reads "
                f"versions up to {FORMAT_VERSION} (upgrade tinyflow)"
            )
        return _Reader(zf, source, device).value(manifest["root"])
