"""`tinyflow sample --checkpoint F --prompt "..."`: generate text from a trained language model."""
from __future__ import annotations

import argparse
import sys

from tinyflow.commands.options import Text, device, input_path, nonnegative_float, nonnegative_int


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `sample` command."""
    parser = subparsers.add_parser(
        "sample", help="generate text from a language-model checkpoint (tinyflow train lstm-lm)",
        description="Feed PROMPT to the LSTM language model in CHECKPOINT and print it followed by "
        "LENGTH sampled tokens. Lower temperatures give safer, more repetitive text; 0 always "
        "picks the most likely token.",
    )
    parser.add_argument("--checkpoint", type=input_path, required=True, help="a checkpoint written by `tinyflow train lstm-lm`")
    parser.add_argument("--prompt", type=Text(empty=True), default="", help="text to continue (default: start of a line)")
    parser.add_argument("--length", type=nonnegative_int, default=300, help="tokens to generate (default: %(default)s)")
    parser.add_argument("--temperature", type=nonnegative_float, default=0.8,
                        help="softmax temperature, >= 0 (default: %(default)s)")
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="sampling seed (default: %(default)s)")
    parser.add_argument("--device", type=device, default="cpu", help="cpu or cuda:N (default: %(default)s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tinyflow.recipes.checkpoint import CheckpointMismatchError
    from tinyflow.recipes.language_model import generate, load_language_model

    try:
        model, vocab, level = load_language_model(args.checkpoint, args.device)
        text = generate(model, vocab, level, args.prompt, args.length, args.temperature, args.seed, args.device)
    except (CheckpointMismatchError, FileNotFoundError, ValueError) as exc:
        print(f"tinyflow sample: error: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0
