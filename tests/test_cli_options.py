"""Every option of every command is checked where it is declared (tinyflow/commands/options.py):
this walks the parsers `tinyflow` builds, so an option added later is covered by being added. Each
value an option's check refuses (out of range, of the wrong type, empty, unknown names) must be one
`tinyflow COMMAND: error: argument --x: ...` line and exit status 2, at parse time: never a
traceback, never exit 0. Also: every option that names a place to write is refused when that place
cannot be written (a path under a regular file; a read-only folder), and the parser records which
options the command line gave (what a resumed run takes from its checkpoint)."""
from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tinyflow import cli
from tinyflow.commands import options

# Positionals that are another program's arguments, passed on as they are: sweep's train options
# (checked with train's parser before any run starts, see tests/test_sweep.py) and launch's script's.
PASSED_ON = {("sweep", "rest"), ("launch", "args")}


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command path, parser) for every command and sub-command under ``parser``."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def _takes_values(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if isinstance(action, (argparse._SubParsersAction, argparse._HelpAction, argparse._VersionAction)):
            continue
        if action.nargs == 0:  # a flag: no value to check
            continue
        yield action


def _cases() -> list[tuple[tuple[str, ...], str, list[str], str]]:
    """(command, argument name, argv, bad value) for every value every option's check refuses."""
    cases = []
    for path, parser in _commands(cli.build_parser()):
        positionals = [a for a in _takes_values(parser) if not a.option_strings]
        for action in _takes_values(parser):
            if (path[-1], action.dest) in PASSED_ON:
                continue
            check = action.type
            bad = check.bad_values() if isinstance(check, options.Check) else ["no-such-choice", ""]
            for value in bad:
                if action.option_strings:
                    name = "/".join(action.option_strings)
                    argv = [*path, f"{action.option_strings[0]}={value}"]
                else:
                    name = action.metavar or action.dest
                    before = positionals[: positionals.index(action)]
                    argv = [*path, *(["x"] * len(before)), value]
                cases.append((path, name, argv, value))
    return cases


CASES = _cases()


def test_every_option_declares_its_check() -> None:
    """An option taking a value has a Check from the option layer, or choices; nothing is taken unchecked."""
    undeclared = []
    commands = set()
    for path, parser in _commands(cli.build_parser()):
        commands.add(" ".join(path))
        for action in _takes_values(parser):
            if (path[-1], action.dest) in PASSED_ON:
                continue
            if not isinstance(action.type, options.Check) and action.choices is None:
                undeclared.append(f"tinyflow {' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert not undeclared, f"options without a declared check: {undeclared}"
    assert {"train", "eval", "data pack", "data synthetic", "sample", "bench allreduce", "bench train",
            "bench scaling", "sweep", "launch"} <= commands
    assert len(CASES) > 250  # every command's options, several bad values each


@pytest.mark.parametrize("path, name, argv, value", CASES,
                         ids=[f"{' '.join(c[0])} {c[1]}={c[3]!r}" for c in CASES])
def test_a_bad_value_is_one_line_and_exit_2(path: tuple[str, ...], name: str, argv: list[str], value: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert captured.out == "" and len(lines) == 1, captured.err
    assert lines[0].startswith(f"tinyflow {' '.join(path)}: error: argument {name}: "), lines[0]
    assert "Traceback" not in captured.err


def _output_options() -> list[tuple[tuple[str, ...], str, list[str]]]:
    """(command, flag, argv before the value) for every option that names a place to write."""
    found = []
    for path, parser in _commands(cli.build_parser()):
        positionals = [a for a in _takes_values(parser) if not a.option_strings]
        for action in _takes_values(parser):
            if not isinstance(action.type, options.OutputPath):
                continue
            if action.option_strings:
                found.append((path, action.option_strings[0], [*path, action.option_strings[0]]))
            else:
                before = positionals[: positionals.index(action)]
                found.append((path, action.dest, [*path, *(["x"] * len(before))]))
    return found


OUTPUTS = _output_options()


def test_the_places_to_write_are_found() -> None:
    flags = {(" ".join(path), flag) for path, flag, _ in OUTPUTS}
    assert {("train", "--checkpoint-dir"), ("train", "--trace"), ("sweep", "--out"), ("bench train", "--out"),
            ("bench train", "--json"), ("bench train", "--plot"), ("bench scaling", "--json"),
            ("bench allreduce", "--out"), ("data pack", "dst"), ("data synthetic", "--out")} <= flags


@pytest.mark.parametrize("path, flag, argv", OUTPUTS, ids=[f"{' '.join(p)} {f}" for p, f, _ in OUTPUTS])
def test_a_place_that_cannot_be_written_is_refused_before_any_work(path: tuple[str, ...], flag: str, argv: list[str],
                                                                  tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("in the way")
    for target, why in ((a_file / "out", f"{str(a_file / 'out')!r} cannot be created: {str(a_file)!r} is a file"),
                        (a_file / "deeper" / "out", f"cannot be created: {str(a_file)!r} is a file")):
        with pytest.raises(SystemExit) as exit_:
            cli.main([*argv, str(target)])
        assert exit_.value.code == 2
        line = capsys.readouterr().err.strip()
        assert line.startswith(f"tinyflow {' '.join(path)}: error: argument {flag}: ") and why in line, line
    assert not (tmp_path / "a-file").is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_a_read_only_folder_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    """A folder that exists but cannot be written: an existing checkpoint folder to resume into
    (the reported case: a whole epoch trained, then lost at the save), and the other outputs.
    Root may write into a folder of mode 0o555: there the OS's answer is simulated (os.access
    says no for that folder), which still tests that every one of these asks it before any work."""
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.access(locked, os.W_OK):  # root
        real_access = os.access
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: (
            False if os.fspath(path).startswith(str(locked)) and mode & os.W_OK else real_access(path, mode, **kw)))
    try:
        for argv, flag in ((["train", "alexnet", "--resume", "--checkpoint-dir", str(locked)], "--checkpoint-dir"),
                           (["train", "alexnet", "--checkpoint-dir", str(locked / "new")], "--checkpoint-dir"),
                           (["sweep", "--out", str(locked), "--grid", "lr=0.1,0.2", "alexnet"], "--out"),
                           (["bench", "train", "alexnet", "--json", str(locked / "cells.json")], "--json")):
            with pytest.raises(SystemExit) as exit_:
                cli.main(argv)
            assert exit_.value.code == 2
            line = capsys.readouterr().err.strip()
            assert line.startswith(f"tinyflow {argv[0]}") and f"argument {flag}: " in line and "not writable" in line
        from tinyflow.recipes.checkpoint import Checkpointer
        from tinyflow.serialization import CheckpointWriteError

        with pytest.raises(CheckpointWriteError, match=r"checkpoint directory .*locked' is not writable"):
            Checkpointer(locked)  # the default folder, runs/MODEL, is checked when the run starts
    finally:
        locked.chmod(0o755)


def test_unwritable_says_why() -> None:
    assert options.unwritable(os.devnull, "folder") == f"{os.devnull!r} is a file, not a folder"
    assert options.unwritable(os.getcwd(), "file") == f"{os.getcwd()!r} is a folder, not a file"


def test_the_parser_records_the_options_given() -> None:
    """What a resumed run keeps from its checkpoint: the options the command line did not give,
    whatever their defaults (--seed 0 given is given; --workers left out is not)."""
    args = cli.build_parser().parse_args(["train", "m", "--seed", "0", "--lr=0.1", "--tie-weights", "--resume"])
    assert {"seed", "lr", "tie_weights", "resume", "model"} <= args.given
    assert not {"workers", "epochs", "amp", "checkpoint_dir", "batch_size"} & args.given
    args = cli.build_parser().parse_args(["bench", "train", "alexnet", "--steps", "2"])
    assert "steps" in args.given and "runs" not in args.given
    assert args.batch_sizes == [16, 32, 64] and args.compare == [] and args.precision == ["fp32"]
