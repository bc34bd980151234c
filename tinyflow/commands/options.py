"""The option layer of the ``tinyflow`` commands: each option declares its check where it is added
(argparse's ``type=``), so that a bad value is one line naming the flag and exit status 2, before the
command does any work (``tinyflow bench train: error: argument --steps: must be >= 1, got -1``):
never a traceback, a late failure or a silently wrong result.

- ``Parser``: the ArgumentParser of ``tinyflow`` and of every command under it. Its errors are that
  one line (no usage block: ``tinyflow COMMAND --help`` has it), and it records which options the
  command line gave (``args.given``: a resumed run takes the others from its checkpoint).
- The checks, each a ``Check``: ``Integer``, ``Number``, ``IntList``, ``ChoiceList``, ``Device``,
  ``DeviceList``, ``Text``, ``KeyValue``, ``InputPath``, ``OutputPath`` (a folder or file this command writes: it
  must be writable now, not after an epoch of training) and ``Parsed`` (a command's own parser).
  A check's ``bad_values()`` are values it refuses: tests/test_cli_options.py walks every option
  of every command's parser and feeds them in, so an option declared here is tested by being declared.

A new command gets all of this by declaring its options with these checks (an option without one,
or without ``choices``, fails that test).
"""
from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NoReturn

__all__ = ["Parser", "RaisingParser", "OptionError", "Check", "Integer", "Number", "IntList", "ChoiceList", "Device",
           "DeviceList", "Text", "KeyValue", "InputPath", "OutputPath", "Parsed", "unwritable", "positive_int",
           "nonnegative_int",
           "nonnegative_float", "positive_float", "device", "text", "input_path", "output_dir", "output_file"]


# ----------------------------------------------------------------------------- the parser


class Parser(argparse.ArgumentParser):
    """argparse's parser, with one error line and a record of the options given.

    ``error`` prints ``PROG: error: MESSAGE`` alone and exits with status 2. After parsing,
    ``args.given`` is the set of destinations the command line gave a value (or a flag) for; the
    sub-commands' parsers are Parsers too (argparse makes them of the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_known_args(self, args: Sequence[str] | None = None,
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self._given: set[str] = set()
        parsed, extras = super().parse_known_args(args, namespace)
        parsed.given = set(getattr(parsed, "given", ())) | self._given  # a sub-command's own, copied up
        return parsed, extras

    def _get_values(self, action: argparse.Action, arg_strings: list[str]) -> Any:
        """Called for each option the command line gives (and each positional): note it as given."""
        if action.option_strings or arg_strings:
            getattr(self, "_given", set()).add(action.dest)
        return super()._get_values(action, arg_strings)


class RaisingParser(Parser):
    """A Parser whose errors raise OptionError instead of exiting (to check another command's
    options from inside a command, e.g. the train options of each run of a sweep)."""

    def error(self, message: str) -> NoReturn:
        raise OptionError(message)


class OptionError(ValueError):
    """A bad option found by a RaisingParser (the message names the flag, as argparse's does)."""


# ----------------------------------------------------------------------------- checks


class Check:
    """An option's value check and conversion (argparse's ``type=``): text -> value, or
    ArgumentTypeError with the reason (argparse prefixes ``argument --flag: ``)."""

    def __call__(self, text: str) -> Any:
        raise NotImplementedError

    def bad_values(self) -> list[str]:
        """Values this check refuses (out of range, of the wrong type, empty)."""
        return [""]

    @staticmethod
    def fail(message: str) -> NoReturn:
        raise argparse.ArgumentTypeError(message)

    def __repr__(self) -> str:  # argparse names the type in some messages
        return type(self).__name__


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        Check.fail(f"expected a whole number, got {text!r}")


class Integer(Check):
    """A whole number in [low, high] (either bound optional)."""

    def __init__(self, low: int | None = None, high: int | None = None):
        self.low, self.high = low, high

    def __call__(self, text: str) -> int:
        value = _whole(text)
        if self.low is not None and value < self.low:
            self.fail(f"must be >= {self.low}, got {value}")
        if self.high is not None and value > self.high:
            self.fail(f"must be <= {self.high}, got {value}")
        return value

    def bad_values(self) -> list[str]:
        bad = ["", "x", "1.5"]
        bad += [str(self.low - 1)] if self.low is not None else []
        return bad + ([str(self.high + 1)] if self.high is not None else [])


class Number(Check):
    """A finite number in [low, high], or (low, high] with ``above`` (nan and inf are refused)."""

    def __init__(self, low: float | None = None, high: float | None = None, above: bool = False):
        self.low, self.high, self.above = low, high, above

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            self.fail(f"expected a number, got {text!r}")
        if not math.isfinite(value):
            self.fail(f"must be a finite number{self._range()}, got {text}")
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            self.fail(f"must be {'>' if self.above else '>='} {self.low:g}, got {text}")
        if self.high is not None and value > self.high:
            self.fail(f"must be <= {self.high:g}, got {text}")
        return value

    def _range(self) -> str:
        parts = [f"{'>' if self.above else '>='} {self.low:g}"] if self.low is not None else []
        parts += [f"<= {self.high:g}"] if self.high is not None else []
        return " " + " and ".join(parts) if parts else ""

    def bad_values(self) -> list[str]:
        bad = ["", "x", "nan", "inf"]
        if self.low is not None:
            bad.append(f"{self.low:g}" if self.above else f"{self.low - 1:g}")
        return bad + ([f"{self.high + 1:g}"] if self.high is not None else [])


def _items(text: str, what: str, example: str) -> list[str]:
    """The comma-separated items of ``text``; an empty item or list is an error."""
    items = [item.strip() for item in text.split(",")]
    if not text.strip():
        Check.fail(f"expected a comma list of {what}, got {text!r}")
    if any(not item for item in items):
        Check.fail(f"{text!r} has an empty item: expected a comma list of {what}, e.g. {example}")
    return items


def _no_repeats(items: Sequence[Any], text: str) -> None:
    seen: set[Any] = set()
    for item in items:
        if item in seen:
            Check.fail(f"{item} appears twice in {text!r}: give each value once")
        seen.add(item)


class IntList(Check):
    """A comma list of whole numbers >= ``low``, each once: ``1,2,4``."""

    def __init__(self, low: int = 1):
        self.low = low

    def __call__(self, text: str) -> list[int]:
        values = []
        for item in _items(text, "whole numbers", "1,2,4"):
            try:
                value = int(item)
            except ValueError:
                self.fail(f"{item!r} in {text!r} is not a whole number")
            if value < self.low:
                self.fail(f"every value must be >= {self.low}, got {value} in {text!r}")
            values.append(value)
        _no_repeats(values, text)
        return values

    def bad_values(self) -> list[str]:
        return ["", ",", "1,x", "1.5", f"{self.low - 1}", f"{self.low},{self.low}"]


class ChoiceList(Check):
    """A comma list of known names, each once: ``fp32,bf16``. ``choices`` may be a function that
    gives them (read when an option is parsed, not when the command is registered)."""

    def __init__(self, choices: Iterable[str] | Callable[[], Iterable[str]]):
        self._choices = choices

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._choices() if callable(self._choices) else self._choices)

    def __call__(self, text: str) -> list[str]:
        known = self.choices
        items = _items(text, f"names out of {', '.join(known)}", ",".join(known[:2]))
        unknown = [item for item in items if item not in known]
        if unknown:
            listed = f"a comma list of {', '.join(known)}" if len(known) > 1 else known[0]
            self.fail(f"unknown {', '.join(map(repr, unknown))}: choose {listed}")
        _no_repeats(items, text)
        return items

    def bad_values(self) -> list[str]:
        first = self.choices[0]
        return ["", ",", "no-such-name", f"{first},", f"{first},{first}"]


class Device(Check):
    """A device that exists here: cpu, or cuda[:N] where CUDA is available."""

    def __call__(self, text: str) -> str:
        from tinyflow.device import Device as DeviceSpec
        from tinyflow.device import cuda_backend

        if not text:
            self.fail("expected a device: 'cpu', 'cuda' or 'cuda:N'")
        kind, colon, index = text.partition(":")
        if kind == "cuda" and colon and not index.isdigit():
            self.fail(f"unknown device {text!r}: expected 'cpu', 'cuda' or 'cuda:N' (N = 0, 1, ...)")
        try:
            dev = DeviceSpec(text)
        except ValueError as exc:
            self.fail(str(exc))
        if dev.type == "cuda":
            cuda = cuda_backend()  # tinyflow_cuda, which only device.py names
            if not cuda.is_available():
                self.fail(f"{text!r}: CUDA is not available here ({cuda.unavailable_reason()}); install "
                          "tinyflow[cuda] on a machine with an NVIDIA GPU, or use --device cpu")
        return text

    def bad_values(self) -> list[str]:
        return ["", "tpu", "cuda:x"]


class DeviceList(Check):
    """A comma list of devices (one may repeat: two runs on one GPU), each as ``Device`` checks it."""

    def __call__(self, text: str) -> list[str]:
        return [device(item) for item in _items(text, "devices", "cuda:0,cuda:1")]

    def bad_values(self) -> list[str]:
        return ["", ",", "cpu,", "tpu"]


class Text(Check):
    """Free text: a name, a pattern, an argument passed on; non-empty unless ``empty``."""

    def __init__(self, empty: bool = False):
        self.empty = empty

    def __call__(self, text: str) -> str:
        if not text and not self.empty:
            self.fail("must not be empty")
        return text

    def bad_values(self) -> list[str]:
        return [] if self.empty else [""]


class KeyValue(Check):
    """``FIELD=VALUE`` with a non-empty FIELD (the VALUE is read by the command)."""

    def __call__(self, text: str) -> str:
        key, sep, _ = text.partition("=")
        if not sep or not key.strip():
            self.fail(f"expected FIELD=VALUE, e.g. hidden_size=512, got {text!r}")
        return text

    def bad_values(self) -> list[str]:
        return ["", "hidden_size", "=512"]


class Parsed(Check):
    """A value read by a command's own parser ``parse(text)``, whose ValueError is the reason."""

    def __init__(self, parse: Callable[[str], Any], bad: Sequence[str] = ("",)):
        self.parse, self.bad = parse, list(bad)

    def __call__(self, text: str) -> Any:
        if not text.strip():
            self.fail("must not be empty")
        try:
            return self.parse(text)
        except ValueError as exc:
            self.fail(str(exc))

    def bad_values(self) -> list[str]:
        return self.bad


class InputPath(Check):
    """A file or folder the command reads (non-empty; whether it exists is the command's to say,
    with what it expected to find there)."""

    def __call__(self, text: str) -> str:
        if not text:
            self.fail("expected a path, got ''")
        return text


class OutputPath(Check):
    """A folder (``kind="folder"``) or file (``kind="file"``) the command writes, checked now: it
    must be, or be creatable as, a writable folder / file, so that no work is lost to a late
    failure. ``stdout``: ``-`` stands for standard output."""

    def __init__(self, kind: str = "folder", stdout: bool = False):
        if kind not in ("folder", "file"):
            raise ValueError(f"OutputPath kind must be 'folder' or 'file', got {kind!r}")
        self.kind, self.stdout = kind, stdout

    def __call__(self, text: str) -> str:
        if not text:
            self.fail(f"expected a {self.kind} to write, got ''")
        if self.stdout and text == "-":
            return text
        problem = unwritable(text, self.kind)
        if problem:
            self.fail(problem)
        return text


def unwritable(path: str | os.PathLike, kind: str = "folder") -> str | None:
    """Why ``path``, a folder or a file (``kind``) to create or replace, cannot be written now,
    or None. A path that does not exist yet must have a writable folder as its nearest existing
    ancestor (a file there is the usual mistake). Read-only file systems count; for root, who
    may write anywhere, only those and files in the way do."""
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path):
        if kind == "folder" and not os.path.isdir(path):
            return f"{path!r} is a file, not a folder"
        if kind == "file" and os.path.isdir(path):
            return f"{path!r} is a folder, not a file"
        folder = path if kind == "folder" else os.path.dirname(path)
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{folder!r} is not writable (permission denied or a read-only file system)"
        if kind == "file" and not os.access(path, os.W_OK):
            return f"{path!r} is not writable (permission denied)"
        return None
    ancestor = os.path.dirname(path)
    while not os.path.exists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{path!r} cannot be created: {ancestor!r} is a file"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{path!r} cannot be created: {ancestor!r} is not writable (permission denied or a read-only file system)"
    return None


# The checks the commands share.
positive_int = Integer(1)  # epochs, batch size, workers to start, ...
nonnegative_int = Integer(0)  # seeds, loader processes, ...
nonnegative_float = Number(0.0)  # a learning rate, a sampling temperature, ...
positive_float = Number(0.0, above=True)  # seconds, megabytes, ...
device = Device()
text = Text()
input_path = InputPath()
output_dir = OutputPath("folder")
output_file = OutputPath("file")
