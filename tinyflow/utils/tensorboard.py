"""``torch.utils.tensorboard.SummaryWriter``: TensorBoard event files, written without TensorBoard.

    from tinyflow.utils.tensorboard import SummaryWriter
    writer = SummaryWriter()                       # runs/<date>_<host>/
    writer.add_scalar("loss/train", loss.item(), step)
    writer.close()                                 # then: tensorboard --logdir runs

An event file is a sequence of records (TFRecord framing: length, masked CRC-32C of the length,
the payload, masked CRC-32C of the payload), each payload an ``Event`` protocol buffer. This
module encodes the few messages it needs by hand (``Event``, ``Summary``, ``HistogramProto``,
``Summary.Image``, the text plugin's string tensor), so it needs neither TensorBoard nor protobuf;
``read_events`` decodes them again (checking every CRC) for tests and for users who want their
scalars back without TensorBoard. Scalars, scalar groups, histograms, images (PNG via Pillow),
matplotlib figures and text are supported; the graph, embeddings, audio, video, meshes and
hyper-parameter tables are not (one clear error each).
"""
from __future__ import annotations

import io
import os
import socket
import struct
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SummaryWriter", "read_events"]


# ------------------------------------------------------------------------------ CRC-32C and framing
def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum of TFRecord framing."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return header + struct.pack("<I", _masked_crc(header)) + payload + struct.pack("<I", _masked_crc(payload))


# ------------------------------------------------------------------------------ protobuf, by hand
def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(int(value))


def _double(field: int, value: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", float(value))


def _float(field: int, value: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", float(value))


def _bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode("utf-8") if isinstance(value, str) else value
    return _key(field, 2) + _varint(len(data)) + data


def _packed_doubles(field: int, values: Any) -> bytes:
    return _bytes(field, np.asarray(values, dtype="<f8").tobytes())


def _event(wall_time: float, step: int = 0, summary: bytes | None = None, file_version: str | None = None) -> bytes:
    """Event {double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5}."""
    out = _double(1, wall_time) + _int(2, step)
    if file_version is not None:
        out += _bytes(3, file_version)
    if summary is not None:
        out += _bytes(5, summary)
    return out


def _summary_value(tag: str, **what: bytes) -> bytes:
    """Summary {repeated Value value = 1}, one Value {string tag = 1; ...}."""
    return _bytes(1, _bytes(1, tag) + b"".join(what.values()))


# ------------------------------------------------------------------------------ the writer
def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        value = value.detach()
    if hasattr(value, "cpu") and hasattr(value, "numpy"):
        value = value.cpu().numpy()
    return np.asarray(value)


def _scalar(op: str, value: Any) -> float:
    array = _to_numpy(value)
    if array.size != 1:
        raise ValueError(f"SummaryWriter.{op}: scalar_value must hold one number, got shape {tuple(array.shape)}")
    return float(array.reshape(()))


class SummaryWriter:
    """Writes TensorBoard event files under ``log_dir`` (default ``runs/<Mon>DD_HH-MM-SS_<host><comment>``).

    PyTorch's constructor arguments; ``max_queue`` events are buffered and written at the latest
    every ``flush_secs`` seconds, on ``flush()`` and on ``close()`` (also when used as a context
    manager). Each ``add_*`` takes ``global_step`` (default 0) and ``walltime`` (default now).
    """

    def __init__(self, log_dir: str | os.PathLike | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = "") -> None:
        if log_dir is None:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.max_queue, self.flush_secs, self.filename_suffix = max(1, int(max_queue)), flush_secs, filename_suffix
        self.purge_step = purge_step
        self._queue: list[bytes] = []
        self._last_flush = time.time()
        self._closed = False
        self._children: dict[str, SummaryWriter] = {}
        try:
            Path(self.log_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OSError(f"SummaryWriter: cannot create log_dir {self.log_dir!r}: {e.strerror}; pass another "
                          "log_dir") from None
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{id(self) % 1000}"
        self.file_path = os.path.join(self.log_dir, name + filename_suffix)
        with open(self.file_path, "wb") as f:
            f.write(_record(_event(time.time(), 0, file_version="brain.Event:2")))

    # -------------------------------------------------------------- the add_* methods
    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None, walltime: float | None = None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        """One point of the curve ``tag``: Summary.Value.simple_value (float32, as TensorBoard plots)."""
        value = _scalar("add_scalar", scalar_value)
        self._add(_summary_value(tag, simple_value=_float(2, value)), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict[str, Any], global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Several curves on one chart: as PyTorch, each goes to its own run ``<log_dir>/<main_tag>_<tag>``."""
        walltime = time.time() if walltime is None else walltime
        for tag, value in tag_scalar_dict.items():
            key = f"{main_tag.replace('/', '_')}_{tag}"
            child = self._children.get(key)
            if child is None:
                child = self._children[key] = SummaryWriter(os.path.join(self.log_dir, key), max_queue=self.max_queue,
                                                            flush_secs=self.flush_secs,
                                                            filename_suffix=self.filename_suffix)
            child.add_scalar(main_tag, value, global_step, walltime)

    def add_histogram(self, tag: str, values: Any, global_step: int | None = None, bins: Any = "tensorflow",
                      walltime: float | None = None, max_bins: int | None = None) -> None:
        """A histogram of ``values`` (HistogramProto): ``bins`` as NumPy's (a count, edges or a rule
        such as "auto"); "tensorflow" (PyTorch's default) means 30 equal bins here."""
        array = _to_numpy(values).astype(np.float64).ravel()
        if array.size == 0:
            raise ValueError(f"SummaryWriter.add_histogram: values for {tag!r} are empty; nothing to draw")
        if not np.isfinite(array).all():
            raise ValueError(f"SummaryWriter.add_histogram: values for {tag!r} hold NaN or inf; drop them first")
        counts, edges = np.histogram(array, bins=30 if bins == "tensorflow" else bins)
        histo = (_double(1, array.min()) + _double(2, array.max()) + _double(3, array.size) + _double(4, array.sum())
                 + _double(5, float(np.dot(array, array))) + _packed_doubles(6, edges[1:]) + _packed_doubles(7, counts))
        self._add(_summary_value(tag, histo=_bytes(5, histo)), global_step, walltime)

    def add_image(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                  dataformats: str = "CHW") -> None:
        """An image (PNG): float values in [0, 1] or uint8 in [0, 255], laid out as ``dataformats``
        (CHW, HWC, HW; 1, 3 or 4 channels)."""
        self._add(_summary_value(tag, image=_bytes(4, _image_proto(_hwc("add_image", img_tensor, dataformats)))),
                  global_step, walltime)

    def add_images(self, tag: str, img_tensor: Any, global_step: int | None = None, walltime: float | None = None,
                   dataformats: str = "NCHW") -> None:
        """A batch of images tiled into one grid (as torchvision.utils.make_grid, 8 a row)."""
        fmt = dataformats.upper()
        if "N" not in fmt:
            raise ValueError(f"SummaryWriter.add_images: dataformats {dataformats!r} needs an N axis (NCHW or NHWC)")
        batch = np.moveaxis(_to_numpy(img_tensor), fmt.index("N"), 0)
        images = [_hwc("add_images", im, fmt.replace("N", "")) for im in batch]
        self._add(_summary_value(tag, image=_bytes(4, _image_proto(_grid(images)))), global_step, walltime)

    def add_figure(self, tag: str, figure: Any, global_step: int | None = None, close: bool = True,
                   walltime: float | None = None) -> None:
        """A matplotlib figure, rendered to PNG (and closed unless ``close=False``)."""
        buf = io.BytesIO()
        figure.savefig(buf, format="png")
        if close:
            import matplotlib.pyplot as plt

            plt.close(figure)
        from PIL import Image

        image = np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGBA"))
        self._add(_summary_value(tag, image=_bytes(4, _image_proto(image))), global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        """Markdown text (the text plugin's one-element string tensor)."""
        metadata = _bytes(1, _bytes(1, "text"))  # SummaryMetadata{plugin_data{plugin_name: "text"}}
        tensor = _int(1, 7) + _bytes(2, _bytes(2, _int(1, 1))) + _bytes(8, text_string)  # DT_STRING, shape [1]
        self._add(_bytes(1, _bytes(1, tag + "/text_summary") + _bytes(9, metadata) + _bytes(8, tensor)),
                  global_step, walltime)

    def _unsupported(self, name: str) -> None:
        raise NotImplementedError(
            f"SummaryWriter.{name}: not supported by tinyflow's writer (scalars, histograms, images, figures and "
            "text are); log it as one of those instead"
        )

    def add_graph(self, model: Any, input_to_model: Any = None, verbose: bool = False, **kwargs: Any) -> None:
        self._unsupported("add_graph")

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, **kwargs: Any) -> None:
        self._unsupported("add_hparams")

    def add_embedding(self, mat: Any, *args: Any, **kwargs: Any) -> None:
        self._unsupported("add_embedding")

    def add_audio(self, tag: str, snd_tensor: Any, *args: Any, **kwargs: Any) -> None:
        self._unsupported("add_audio")

    def add_video(self, tag: str, vid_tensor: Any, *args: Any, **kwargs: Any) -> None:
        self._unsupported("add_video")

    def add_mesh(self, tag: str, vertices: Any, *args: Any, **kwargs: Any) -> None:
        self._unsupported("add_mesh")

    def add_pr_curve(self, tag: str, labels: Any, predictions: Any, *args: Any, **kwargs: Any) -> None:
        self._unsupported("add_pr_curve")

    # -------------------------------------------------------------- queue and files
    def get_logdir(self) -> str:
        return self.log_dir

    def _add(self, summary: bytes, global_step: int | None, walltime: float | None) -> None:
        if self._closed:
            raise RuntimeError(f"SummaryWriter: the writer of {self.log_dir!r} is closed; make a new one")
        wall = time.time() if walltime is None else float(walltime)
        self._queue.append(_record(_event(wall, 0 if global_step is None else int(global_step), summary=summary)))
        if len(self._queue) >= self.max_queue or time.time() - self._last_flush >= self.flush_secs:
            self.flush()

    def flush(self) -> None:
        """Append the queued events to the file (and those of add_scalars' runs)."""
        if self._queue:
            with open(self.file_path, "ab") as f:
                f.write(b"".join(self._queue))
                f.flush()
                os.fsync(f.fileno())
            self._queue.clear()
        self._last_flush = time.time()
        for child in self._children.values():
            child.flush()

    def close(self) -> None:
        if not self._closed:
            self.flush()
            for child in self._children.values():
                child.close()
            self._closed = True

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _hwc(op: str, image: Any, dataformats: str) -> np.ndarray:
    """(H, W, C) uint8 from a float [0, 1] or uint8 image laid out as ``dataformats``."""
    array = _to_numpy(image)
    fmt = dataformats.upper()
    if sorted(fmt) not in (sorted("CHW"), sorted("HW")) or array.ndim != len(fmt):
        raise ValueError(f"SummaryWriter.{op}: image of shape {tuple(array.shape)} does not match dataformats "
                         f"{dataformats!r}; use CHW, HWC or HW")
    if fmt == "HW" or "C" not in fmt:
        array, fmt = array[..., None], fmt + "C"
    array = np.transpose(array, [fmt.index(a) for a in "HWC"])
    if array.shape[2] not in (1, 3, 4):
        raise ValueError(f"SummaryWriter.{op}: an image needs 1, 3 or 4 channels, got {array.shape[2]}")
    if array.dtype != np.uint8:
        array = (np.clip(array.astype(np.float64), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return array


def _grid(images: list[np.ndarray], per_row: int = 8, pad: int = 2) -> np.ndarray:
    h, w, c = images[0].shape
    rows = -(-len(images) // per_row)
    cols = min(per_row, len(images))
    grid = np.zeros((rows * (h + pad) + pad, cols * (w + pad) + pad, c), np.uint8)
    for i, im in enumerate(images):
        r, q = divmod(i, per_row)
        grid[pad + r * (h + pad): pad + r * (h + pad) + h, pad + q * (w + pad): pad + q * (w + pad) + w] = im
    return grid


def _image_proto(hwc: np.ndarray) -> bytes:
    """Summary.Image {int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded_image_string = 4}."""
    from PIL import Image

    buf = io.BytesIO()
    mode = {1: "L", 3: "RGB", 4: "RGBA"}[hwc.shape[2]]
    Image.fromarray(hwc[..., 0] if hwc.shape[2] == 1 else hwc, mode=mode).save(buf, format="PNG")
    return _int(1, hwc.shape[0]) + _int(2, hwc.shape[1]) + _int(3, hwc.shape[2]) + _bytes(4, buf.getvalue())


# ------------------------------------------------------------------------------ reading them back
def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field, wire type, value) of a protobuf message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = data[i: i + 8], i + 8
        elif wire == 5:
            value, i = data[i: i + 4], i + 4
        elif wire == 2:
            size, i = _read_varint(data, i)
            value, i = data[i: i + size], i + size
        else:
            raise ValueError(f"read_events: unsupported protobuf wire type {wire}")
        yield field, wire, value


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def read_events(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The events of one event file, checking each record's CRCs: a dict per event with
    ``wall_time``, ``step`` and either ``file_version`` or ``values`` (tag -> a float for scalars,
    a dict for histograms (min, max, num, sum, sum_squares, bucket_limit, bucket), images (height,
    width, colorspace, png) and text (text))."""
    raw = Path(path).read_bytes()
    events, i = [], 0
    while i < len(raw):
        header = raw[i: i + 8]
        (length,) = struct.unpack("<Q", header)
        (crc,) = struct.unpack("<I", raw[i + 8: i + 12])
        payload = raw[i + 12: i + 12 + length]
        (payload_crc,) = struct.unpack("<I", raw[i + 12 + length: i + 16 + length])
        if crc != _masked_crc(header) or payload_crc != _masked_crc(payload) or len(payload) != length:
            raise ValueError(f"read_events: {path}: corrupt record at byte {i} (CRC mismatch or truncated)")
        i += 16 + length
        events.append(_decode_event(payload))
    return events


def _decode_event(payload: bytes) -> dict[str, Any]:
    event: dict[str, Any] = {"step": 0}
    for field, _, value in _fields(payload):
        if field == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif field == 2:
            event["step"] = value
        elif field == 3:
            event["file_version"] = value.decode()
        elif field == 5:
            event["values"] = dict(_decode_value(v) for f, _, v in _fields(value) if f == 1)
    return event


def _decode_value(data: bytes) -> tuple[str, Any]:
    tag, result = "", None
    for field, _, value in _fields(data):
        if field == 1:
            tag = value.decode()
        elif field == 2:
            result = struct.unpack("<f", value)[0]
        elif field == 5:
            result = {}
            names = {1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}
            for f, _, v in _fields(value):
                if f in names:
                    result[names[f]] = struct.unpack("<d", v)[0]
                elif f in (6, 7):
                    result["bucket_limit" if f == 6 else "bucket"] = np.frombuffer(v, dtype="<f8").tolist()
        elif field == 4:
            names = {1: "height", 2: "width", 3: "colorspace", 4: "png"}
            result = {names[f]: v for f, _, v in _fields(value) if f in names}
        elif field == 8:
            result = {"text": next(v.decode() for f, _, v in _fields(value) if f == 8)}
    return tag, result
