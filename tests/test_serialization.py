"""tf.save / tf.load: round trips, the .npz format, atomic writes and clear errors."""

from __future__ import annotations

import io
import json
import math
import os
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tinyflow as tf
import tinyflow.nn as nn
import tinyflow.serialization as serialization
from tinyflow.optim import SGD


def assert_same(a, b) -> None:
    """Deep equality that also checks types, dtypes and Tensor flags."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, tf.Tensor):
        assert a.dtype == b.dtype and a.requires_grad == b.requires_grad and str(a.device) == str(b.device)
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    elif isinstance(a, (np.ndarray, np.generic)):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


def sample_object():
    rng = np.random.default_rng(0)
    return {
        "model": {
            "fc1.weight": tf.tensor(rng.standard_normal((3, 4)).astype(np.float32)),
            "fc1.bias": tf.tensor(np.zeros(3, np.float32), requires_grad=True),
            "bn.num_batches_tracked": tf.tensor(np.array(7, np.int64)),
        },
        "optim": {
            "state": {0: {"step": 3, "exp_avg": rng.standard_normal(5).astype(np.float64)}},
            "param_groups": [{"lr": 0.1, "betas": (0.9, 0.999), "nesterov": False, "params": [0]}],
        },
        "arrays": [
            np.arange(6, dtype=np.int64).reshape(2, 3),
            np.array([True, False]),
            np.ones((0, 4), np.float16),
            np.float32(2.5),
            np.float64(0.25),
            np.int64(-3),
            np.array(1.5),
            np.asfortranarray(np.arange(6.0).reshape(2, 3)),
        ],
        "numbers": [1, -2.5, float("inf"), float("-inf"), float("nan"), True, None, 10**15],
        "text": "héllo / wörld",
        "empty": {},
    }


def test_round_trip_preserves_structure_types_and_values(tmp_path) -> None:
    obj = sample_object()
    tf.save(obj, tmp_path / "ckpt.npz")
    back = tf.load(tmp_path / "ckpt.npz")
    assert_same(obj, back)


arrays = st.builds(
    lambda shape, dtype, seed: (np.random.default_rng(seed).standard_normal(shape) * 10).astype(dtype),
    st.lists(st.integers(0, 3), max_size=3).map(tuple),
    st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.bool_]),
    st.integers(0, 2**16),
)
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    arrays,
    arrays.map(lambda a: tf.tensor(a)),
)
nested = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-5, 5)), children, max_size=3),
    ),
    max_leaves=10,
)


@settings(max_examples=25, deadline=None)
@given(obj=nested)
def test_round_trip_of_random_nested_structures(obj) -> None:
    buf = io.BytesIO()
    tf.save(obj, buf)
    buf.seek(0)
    assert_same(tf.load(buf), obj)


def test_round_trip_of_a_model_and_optimizer(tmp_path) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 2))
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = tf.tensor(np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32))
    model(x).sum().backward()
    opt.step()
    tf.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "m.ckpt")

    model2 = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.Linear(8, 2))
    opt2 = SGD(model2.parameters(), lr=0.5)
    ckpt = tf.load(tmp_path / "m.ckpt")
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    np.testing.assert_array_equal(model2(x).numpy(), model(x).numpy())
    assert opt2.param_groups[0]["momentum"] == 0.9


def test_file_opens_with_plain_numpy(tmp_path) -> None:
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    tf.save({"model": {"fc1.weight": tf.tensor(w)}, "step": 5}, tmp_path / "ckpt.npz")
    with np.load(tmp_path / "ckpt.npz") as npz:
        np.testing.assert_array_equal(npz["model/fc1.weight"], w)
    with zipfile.ZipFile(tmp_path / "ckpt.npz") as zf:
        assert serialization.MANIFEST_NAME in zf.namelist()


def test_save_and_load_through_a_file_object() -> None:
    buf = io.BytesIO()
    obj = {"w": tf.tensor(np.ones(3, np.float32)), "lr": 0.1}
    tf.save(obj, buf)
    buf.seek(0)
    assert_same(tf.load(buf), obj)


def test_map_location_cpu(tmp_path) -> None:
    tf.save({"w": tf.tensor(np.ones(2, np.float32))}, tmp_path / "c")
    w = tf.load(tmp_path / "c", map_location="cpu")["w"]
    assert str(w.device) == "cpu"


def test_crash_mid_write_leaves_old_file_intact(tmp_path, monkeypatch) -> None:
    path = tmp_path / "ckpt.npz"
    old = {"w": tf.tensor(np.ones(4, np.float32)), "step": 1}
    tf.save(old, path)

    real_write_array = np.lib.format.write_array
    calls = {"n": 0}

    def crash_on_second_array(fp, array, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            fp.write(b"partial garbage")
            raise OSError("disk died mid-write")
        return real_write_array(fp, array, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "write_array", crash_on_second_array)
    new = {"a": tf.tensor(np.zeros(4, np.float32)), "b": tf.tensor(np.zeros(4, np.float32)), "step": 2}
    with pytest.raises(OSError, match="disk died"):
        tf.save(new, path)
    monkeypatch.undo()

    assert calls["n"] == 2  # it really failed in the middle
    assert_same(tf.load(path), old)
    assert sorted(os.listdir(tmp_path)) == ["ckpt.npz"]  # no temporary file left behind


def test_crash_before_rename_keeps_old_file(tmp_path, monkeypatch) -> None:
    path = tmp_path / "ckpt"
    tf.save({"v": 1}, path)

    def failing_replace(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(KeyboardInterrupt):
        tf.save({"v": 2}, path)
    monkeypatch.undo()
    assert tf.load(path) == {"v": 1}
    assert os.listdir(tmp_path) == ["ckpt"]


def test_loading_a_file_that_is_not_a_checkpoint(tmp_path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(serialization.CheckpointError, match="not a tinyflow checkpoint"):
        tf.load(text)
    plain = tmp_path / "plain.npz"
    np.savez(plain, w=np.ones(3))
    with pytest.raises(serialization.CheckpointError, match="no __tinyflow__.json.*numpy.load"):
        tf.load(plain)
    truncated = tmp_path / "trunc.ckpt"
    tf.save({"w": np.ones(1000)}, tmp_path / "full.ckpt")
    truncated.write_bytes((tmp_path / "full.ckpt").read_bytes()[:500])
    with pytest.raises(serialization.CheckpointError):
        tf.load(truncated)
    with pytest.raises(FileNotFoundError, match="no such file"):
        tf.load(tmp_path / "missing.ckpt")


def test_loading_a_pytorch_checkpoint_says_so(tmp_path) -> None:
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.ones(3)}, tmp_path / "model.pt")
    with pytest.raises(serialization.CheckpointError, match="PyTorch checkpoint.*torch.load"):
        tf.load(tmp_path / "model.pt")


def test_saved_file_gets_ordinary_permissions(tmp_path) -> None:
    umask = os.umask(0o022)
    try:
        tf.save({"v": 1}, tmp_path / "ckpt")
    finally:
        os.umask(umask)
    assert (tmp_path / "ckpt").stat().st_mode & 0o777 == 0o644


def test_checkpoint_from_another_model_lists_missing_and_unexpected_keys(tmp_path) -> None:
    tf.save(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).state_dict(), tmp_path / "a")
    other = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with pytest.raises(KeyError) as info:
        other.load_state_dict(tf.load(tmp_path / "a"))
    message = str(info.value)
    assert "2.weight" in message and "2.bias" in message  # missing from the checkpoint
    assert "1.weight" in message and "1.bias" in message  # unexpected in the checkpoint


def test_checkpoint_from_another_model_lists_shape_mismatches(tmp_path) -> None:
    tf.save(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2)).state_dict(), tmp_path / "a")
    other = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 2))
    with pytest.raises(ValueError) as info:
        other.load_state_dict(tf.load(tmp_path / "a"))
    message = str(info.value)
    assert "0.weight" in message and "(8, 4)" in message and "(6, 4)" in message
    assert "1.weight" in message and "(2, 8)" in message and "(2, 6)" in message


def test_unsupported_objects_are_clear_errors(tmp_path) -> None:
    with pytest.raises(TypeError, match=r"cannot pickle function at 'a'.*state_dict\(\)"):
        tf.save({"a": lambda: 0}, tmp_path / "x")
    with pytest.raises(TypeError, match="key"):
        tf.save({(1, 2): 3}, tmp_path / "x")
    with pytest.raises(TypeError, match="dtype object"):
        tf.save({"a": np.array([object()])}, tmp_path / "x")
    assert not os.path.exists(tmp_path / "x")


# ---- bfloat16: NumPy's .npy has no bf16, so it travels as its raw bits ------------------------
def _bf16() -> np.dtype:
    return np.dtype(pytest.importorskip("ml_dtypes").bfloat16)


def _manifest(path) -> dict:
    with zipfile.ZipFile(path) as zf:
        return json.loads(zf.read(serialization.MANIFEST_NAME))


@settings(max_examples=25, deadline=None)
@given(bits=st.lists(st.integers(0, 0xFFFF), min_size=0, max_size=40), requires_grad=st.booleans())
def test_bf16_tensors_round_trip_bit_for_bit(bits, requires_grad) -> None:
    """Every bit pattern (NaN payloads, infinities, -0, subnormals) comes back unchanged."""
    arr = np.array(bits, dtype=np.uint16).view(_bf16())
    t = tf.tensor(arr)
    t.requires_grad = requires_grad
    obj = {"t": t, "a": arr.copy(), "s": arr[:1].reshape(()).copy()[()] if bits else None}
    buf = io.BytesIO()
    tf.save(obj, buf)
    buf.seek(0)
    back = tf.load(buf)
    assert back["t"].dtype == _bf16() and back["t"].requires_grad == requires_grad
    np.testing.assert_array_equal(back["t"].numpy().view(np.uint16), arr.view(np.uint16))
    assert back["a"].dtype == _bf16()
    np.testing.assert_array_equal(back["a"].view(np.uint16), arr.view(np.uint16))
    if bits:
        assert back["s"].dtype == _bf16() and np.asarray(back["s"]).view(np.uint16) == bits[0]


def test_bf16_checkpoint_stores_raw_bits_and_says_version_2(tmp_path) -> None:
    w = np.array([[1.0, -2.5], [3.140625, 0.0]], dtype=np.float32).astype(_bf16())
    tf.save({"w": tf.tensor(w)}, tmp_path / "bf16")
    tf.save({"w": tf.tensor(w.astype(np.float32))}, tmp_path / "fp32")
    assert _manifest(tmp_path / "bf16")["version"] == 2
    assert _manifest(tmp_path / "bf16")["root"]["items"][0][1]["dtype"] == "bfloat16"
    assert _manifest(tmp_path / "fp32")["version"] == 1  # files without bf16 stay readable by older tinyflow
    with np.load(tmp_path / "bf16") as npz:  # other tools see the bits
        np.testing.assert_array_equal(npz["w"], w.view(np.uint16))


def test_bf16_model_and_optimizer_state_round_trip(tmp_path) -> None:
    from tinyflow.optim import Adam

    def make() -> tuple[nn.Module, Adam]:
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).bfloat16()
        return model, Adam(model.parameters(), lr=1e-3)

    model, opt = make()
    x = tf.tensor(np.random.default_rng(0).standard_normal((5, 4)), dtype="bf16")
    for _ in range(2):
        opt.zero_grad()
        (model(x).float() ** 2).sum().backward()
        opt.step()
    tf.save({"model": model.state_dict(), "optim": opt.state_dict()}, tmp_path / "m.ckpt")

    model2, opt2 = make()
    ckpt = tf.load(tmp_path / "m.ckpt")
    assert all(v.dtype == _bf16() for v in ckpt["model"].values())
    model2.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    for (name, p), q in zip(model.named_parameters(), model2.parameters()):
        assert q.dtype == _bf16()
        np.testing.assert_array_equal(p.numpy().view(np.uint16), q.numpy().view(np.uint16), err_msg=name)
        for key, value in opt.state[p].items():
            assert_same(opt2.state[q][key], value)  # fp32 buffers and master residuals, exactly


def test_loading_bf16_without_ml_dtypes_names_it(tmp_path, monkeypatch) -> None:
    tf.save({"w": tf.tensor(np.ones(2, dtype=_bf16()))}, tmp_path / "c")
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes raises ImportError
    with pytest.raises(TypeError, match="ml_dtypes"):
        tf.load(tmp_path / "c")


# --------------------------------------------------------------------------- damaged files


def _small_checkpoint(path) -> dict:
    obj = {"model": {"w": tf.tensor(np.arange(12, dtype=np.float32).reshape(3, 4)), "b": np.ones(3)},
           "step": 3, "lr": 0.1, "t": (1, [2, None])}
    tf.save(obj, path)
    return obj


def _one_line_naming(exc: BaseException, path) -> str:
    message = str(exc)
    assert repr(str(path)) in message and "\n" not in message, message
    return message


def test_every_flipped_byte_is_caught_or_harmless(tmp_path) -> None:
    """A flipped byte anywhere in a checkpoint gives a CheckpointError naming the file (never a
    BadZipFile, KeyError, OSError... and never a silently different value): the zip CRCs cover the
    data and the manifest; flips in fields that nothing reads load the same objects."""
    obj = _small_checkpoint(tmp_path / "good.ckpt")
    data = (tmp_path / "good.ckpt").read_bytes()
    bad = tmp_path / "flipped.ckpt"
    caught = 0
    for i in range(len(data)):
        flipped = bytearray(data)
        flipped[i] ^= 0x10
        bad.write_bytes(bytes(flipped))
        try:
            back = tf.load(bad)
        except serialization.CheckpointError as exc:
            _one_line_naming(exc, bad)
            caught += 1
        else:
            assert_same(back, obj)
    assert caught > len(data) * 0.7


def test_a_flipped_data_byte_says_damaged_and_names_the_array(tmp_path) -> None:
    _small_checkpoint(tmp_path / "c.ckpt")
    data = bytearray((tmp_path / "c.ckpt").read_bytes())
    w = np.arange(12, dtype=np.float32).tobytes()
    data[data.index(w) + 5] ^= 0x01  # one bit of model/w
    (tmp_path / "c.ckpt").write_bytes(bytes(data))
    with pytest.raises(serialization.CheckpointError) as info:
        tf.load(tmp_path / "c.ckpt")
    message = _one_line_naming(info.value, tmp_path / "c.ckpt")
    assert "(array 'model/w') is damaged" in message and "BadZipFile: Bad CRC-32" in message
    assert "load another checkpoint" in message


def test_a_truncated_checkpoint_says_truncated(tmp_path) -> None:
    _small_checkpoint(tmp_path / "full.ckpt")
    data = (tmp_path / "full.ckpt").read_bytes()
    cut = tmp_path / "cut.ckpt"
    for n in [4, 40, 47, 100, len(data) // 2, len(data) - 30, len(data) - 1]:
        cut.write_bytes(data[:n])
        with pytest.raises(serialization.CheckpointError, match="is truncated") as info:
            tf.load(cut)
        message = _one_line_naming(info.value, cut)
        assert f"({n} bytes" in message and "not a tinyflow checkpoint" not in message
        if n >= 47:  # long enough to show the manifest's name, which tf.save writes first
            assert "begins as a tinyflow checkpoint" in message
    with pytest.raises(serialization.CheckpointError, match="the given file object is truncated"):
        tf.load(io.BytesIO(data[:200]))
    cut.write_bytes(b"")
    with pytest.raises(serialization.CheckpointError, match=r"is empty \(0 bytes\)"):
        tf.load(cut)


def _write_manifest(path, manifest, arrays=()) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(serialization.MANIFEST_NAME, json.dumps(manifest))
        for name in arrays:
            with zf.open(name + ".npy", "w") as f:
                np.lib.format.write_array(f, np.ones(2))


@pytest.mark.parametrize(
    "root, error",
    [
        ({"type": "dict"}, "KeyError: 'items'"),
        ({"type": "dict", "items": [[1]]}, "ValueError: not enough values to unpack"),
        ({"type": "list", "items": 5}, "TypeError"),
        ({"type": "array"}, "KeyError: 'name'"),
        ({"type": "float", "value": "lots"}, "ValueError: could not convert"),
        ({"type": "dict", "items": [[["a"], 1]]}, "TypeError: unhashable"),
    ],
)
def test_a_malformed_manifest_is_a_checkpoint_error(tmp_path, root, error) -> None:
    path = tmp_path / "odd.ckpt"
    _write_manifest(path, {"format": "tinyflow-checkpoint", "version": 1, "root": root}, arrays=["x"])
    with pytest.raises(serialization.CheckpointError, match="has a malformed manifest") as info:
        tf.load(path)
    assert error in _one_line_naming(info.value, path)


def test_a_manifest_without_root_or_with_unknown_entries(tmp_path) -> None:
    path = tmp_path / "odd.ckpt"
    _write_manifest(path, {"format": "tinyflow-checkpoint", "version": 1})
    with pytest.raises(serialization.CheckpointError, match="malformed manifest.*no 'root'"):
        tf.load(path)
    _write_manifest(path, {"format": "tinyflow-checkpoint", "version": 1, "root": {"type": "set"}})
    with pytest.raises(serialization.CheckpointError, match="unknown manifest entry of type 'set'"):
        tf.load(path)
    _write_manifest(path, {"format": "tinyflow-checkpoint", "version": 1, "root": {"type": "array", "name": "y"}})
    with pytest.raises(serialization.CheckpointError, match="names array 'y', which is missing"):
        tf.load(path)


# --------------------------------------------------------------------------- failed writes


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_a_full_disk_is_one_clear_error_and_keeps_the_last_checkpoint(tmp_path, monkeypatch, where) -> None:
    import errno

    path = tmp_path / "last.ckpt"
    old = {"w": tf.tensor(np.ones(4, np.float32)), "epoch": 1}
    tf.save(old, path)

    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "write":

        def write_then_fill_up(fp, array, *args, **kwargs):
            fp.write(b"\x00" * 100)  # some of it made it to the disk
            no_space()

        monkeypatch.setattr(np.lib.format, "write_array", write_then_fill_up)
    else:
        monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(serialization.CheckpointWriteError) as info:
        tf.save({"w": tf.tensor(np.zeros(4, np.float32)), "epoch": 2}, path)
    monkeypatch.undo()
    err = info.value
    assert isinstance(err, OSError) and err.errno == errno.ENOSPC  # existing `except OSError` still works
    message = _one_line_naming(err, path)
    assert message.startswith("tf.save: no space left in") and repr(str(tmp_path)) in message
    assert f"the previous {str(path)!r} is unchanged" in message and "Free some space" in message
    assert_same(tf.load(path), old)
    assert os.listdir(tmp_path) == ["last.ckpt"]  # the temporary is gone too


def test_a_directory_that_refuses_new_files_is_one_clear_error(tmp_path, monkeypatch) -> None:
    import errno

    real_open = os.open

    def read_only(path, flags, *args):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(serialization.CheckpointWriteError) as info:
        tf.save({"v": 1}, tmp_path / "last.ckpt")
    monkeypatch.undo()
    message = _one_line_naming(info.value, tmp_path / "last.ckpt")
    assert f"cannot create files in {str(tmp_path)!r} (Read-only file system)" in message
    assert "was not written" in message and "Save to a writable directory" in message
    assert info.value.errno == errno.EROFS
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        tf.save({"v": 1}, tmp_path / "a_file" / "x.ckpt")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_directory_keeps_the_last_checkpoint(tmp_path) -> None:
    path = tmp_path / "ro" / "last.ckpt"
    path.parent.mkdir()
    tf.save({"epoch": 1}, path)
    path.parent.chmod(0o555)
    try:
        with pytest.raises(serialization.CheckpointWriteError, match="cannot create files in") as info:
            tf.save({"epoch": 2}, path)
        assert f"the previous {str(path)!r} is unchanged" in str(info.value)
    finally:
        path.parent.chmod(0o755)
    assert tf.load(path) == {"epoch": 1}


# --------------------------------------------------------------------------- stale temporaries


def _save_until_killed(path: str) -> None:
    """In a child process: start tf.save(path) and hang in the middle, as if killed there."""
    import time

    def hang(fp, array, *args, **kwargs):
        fp.write(b"partial")
        fp.flush()
        time.sleep(600)

    np.lib.format.write_array = hang
    tf.save({"w": np.ones(3)}, path)


def _start_writer(path):
    import multiprocessing
    import time

    proc = multiprocessing.get_context("fork").Process(target=_save_until_killed, args=(str(path),), daemon=True)
    proc.start()
    deadline = time.monotonic() + 20
    while not [n for n in os.listdir(path.parent) if f".{proc.pid}." in n]:
        assert time.monotonic() < deadline, "the writer made no temporary"
        time.sleep(0.02)
    (name,) = [n for n in os.listdir(path.parent) if f".{proc.pid}." in n]
    return proc, path.parent / name


def test_clean_stale_temporaries_removes_only_dead_writers_own_temporaries(tmp_path) -> None:
    import signal
    import time

    path = tmp_path / "last.ckpt"
    tf.save({"epoch": 1}, path)
    killed, killed_tmp = _start_writer(path)
    os.kill(killed.pid, signal.SIGKILL)  # a kill during save
    killed.join()
    live, live_tmp = _start_writer(path)  # another run, saving right now
    assert killed_tmp.name.startswith(".last.ckpt.") and killed_tmp.name.endswith(".tmp")

    own = tmp_path / f".last.ckpt.{serialization._host_tag()}.{os.getpid()}.{'a' * 12}.tmp"  # this process's
    other_host = tmp_path / f".last.ckpt.elsewhere.{killed.pid}.{'b' * 12}.tmp"  # pid means nothing here
    untagged = tmp_path / f".best.ckpt.{'c' * 12}.tmp"  # from a tinyflow before pid tags
    old_untagged = tmp_path / f".last.ckpt.{'d' * 12}.tmp"
    others = [tmp_path / n for n in ("notes.tmp", ".hidden.tmp", "last.ckpt.tmp", ".last.ckpt.xyz.tmp", "metrics.jsonl")]
    for p in [own, other_host, untagged, old_untagged, *others]:
        p.write_bytes(b"x")
    (tmp_path / f".dir.{'e' * 12}.tmp").mkdir()
    two_hours_ago = time.time() - 7200
    os.utime(old_untagged, (two_hours_ago, two_hours_ago))
    os.utime(others[0], (two_hours_ago, two_hours_ago))

    try:
        removed = serialization.clean_stale_temporaries(tmp_path)
        assert sorted(removed) == sorted([str(killed_tmp), str(old_untagged)])
        assert live_tmp.exists() and own.exists() and other_host.exists() and untagged.exists()
        assert all(p.exists() for p in others) and (tmp_path / f".dir.{'e' * 12}.tmp").is_dir()
        assert tf.load(path) == {"epoch": 1}
        # Once untouched for max_age, the temporaries of other hosts and untagged ones go too.
        os.utime(other_host, (two_hours_ago, two_hours_ago))
        os.utime(untagged, (two_hours_ago, two_hours_ago))
        assert sorted(serialization.clean_stale_temporaries(tmp_path)) == sorted([str(other_host), str(untagged)])
        assert live_tmp.exists() and own.exists()
    finally:
        os.kill(live.pid, signal.SIGKILL)
        live.join()
    assert serialization.clean_stale_temporaries(tmp_path) == [str(live_tmp)]  # its writer is gone now
    assert serialization.clean_stale_temporaries(tmp_path / "missing") == []


def test_whole_module_saves_as_pytorch_does_and_loads_only_with_weights_only_false(tmp_path) -> None:
    """torch.save(model) pickles it; torch.load refuses the pickle unless weights_only=False (2.6+)."""
    import pickle

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    model[0].weight.requires_grad = False
    path = tmp_path / "model.pt"
    tf.save({"model": model, "epoch": 3}, path)
    with pytest.raises(pickle.UnpicklingError, match="pickled .*Sequential.*weights_only=False"):
        tf.load(path)
    with pytest.raises(pickle.UnpicklingError):
        tf.load(path, weights_only=True)
    back = tf.load(path, weights_only=False)
    assert back["epoch"] == 3 and type(back["model"]) is nn.Sequential
    x = tf.tensor(np.random.default_rng(0).standard_normal((5, 3)), dtype=tf.float32)
    np.testing.assert_array_equal(back["model"](x).numpy(), model(x).numpy())
    params = list(back["model"].parameters())
    assert all(type(p) is nn.Parameter for p in params)
    assert [p.requires_grad for p in params] == [False, True, True, True]
    # the tensors are .npy members beside the pickle, readable without unpickling anything
    import zipfile

    names = zipfile.ZipFile(path).namelist()
    assert sum(n.endswith(".npy") for n in names) == 4 and sum(n.endswith(".pkl") for n in names) == 1
