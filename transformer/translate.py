"""Translate from the command line with a trained checkpoint folder.

    python -m transformer.translate --model pretrained/numbers-en-de "three hundred and twelve" "seven"
    python -m transformer.translate --model DIR "seven" --beam-size 4
    python -m transformer.translate --model DIR "seven" --temperature 0.8 --top-k 5 --seed 0

Prints one translation per input text, one per line, in order. Bad arguments, a folder
that is not a checkpoint, or an input that cannot be translated print a one-line message
on stderr and exit with status 2; warnings (unknown characters, truncation) go to stderr.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from .checkpoints.checkpoint import CheckpointError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer.translate",
        description="Translate texts with a trained checkpoint folder; one translation per line.",
    )
    parser.add_argument("texts", nargs="+", metavar="TEXT", help="text(s) to translate")
    parser.add_argument("--model", required=True, metavar="DIR",
                        help="checkpoint folder written by training (or a name under pretrained/)")
    parser.add_argument("--step", type=int, default=None, help="use the snapshot of this training step")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--max-len", type=int, default=None, help="most output tokens (default: the model's max_len)")
    beam = parser.add_argument_group("beam search")
    beam.add_argument("--beam-size", type=int, default=None, help="beam search with this many beams")
    beam.add_argument("--length-penalty", type=float, default=None,
                      help="length penalty alpha (default: the model's; GNMT's 0.6 for our models, a Hugging Face "
                      "folder's own, with transformers' rule)")
    sampling = parser.add_argument_group("sampling (any of these switches greedy decoding to sampling)")
    sampling.add_argument("--temperature", type=float, default=None)
    sampling.add_argument("--top-k", type=int, default=None)
    sampling.add_argument("--top-p", type=float, default=None)
    sampling.add_argument("--seed", type=int, default=None, help="makes sampling reproducible")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)  # exits with status 2 and a usage message on bad arguments
    from .decoding import pick_strategy
    from .pipeline import load_pretrained  # after parsing, so --help stays fast

    try:  # the rule and its message live in decoding; here they become a usage error
        pick_strategy(beam_size=args.beam_size, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                      seed=args.seed)
    except ValueError as error:
        parser.error(str(error))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            try:
                pipe = load_pretrained(args.model, step=args.step, device=args.device)
            except RuntimeError as error:  # e.g. a device this torch build does not have
                raise ValueError(f"cannot load the model on {args.device!r}: {error}") from None
            translations = pipe.translate(
                list(args.texts), beam_size=args.beam_size, length_penalty=args.length_penalty,
                temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                max_len=args.max_len,
            )
        except (CheckpointError, ValueError, TypeError) as error:
            _show_warnings(caught)
            print(f"error: {error}", file=sys.stderr)
            return 2
    _show_warnings(caught)
    for translation in translations:
        print(translation)
    return 0


def _show_warnings(caught: list[warnings.WarningMessage]) -> None:
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
