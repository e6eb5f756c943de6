"""``python -m transformer.hub``: the command line of ``transformer.hub``.

    python -m transformer.hub download Helsinki-NLP/opus-mt-en-de [--out DIR] [--revision REV] [--force]
    python -m transformer.hub download google/flan-t5-small      (facebook/bart-base,
        facebook/mbart-large-50-many-to-many-mmt, facebook/nllb-200-distilled-600M)

Exit status 0 on success, 2 with a one-paragraph message (no traceback) when the download cannot be done.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .download import DEFAULT_OUT, DownloadError, download
from .families import supported


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m transformer.hub",
        description="Hugging Face translation models (Marian, T5, BART, mBART-50, NLLB) for this package.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    fetch = commands.add_parser(
        "download",
        help="download a model folder from the Hugging Face Hub",
        description=f"Download a model of a supported family (model_type {', '.join(supported())}) from the "
                    "Hugging Face Hub into OUT/<name>, e.g. Helsinki-NLP/opus-mt-en-de into "
                    "pretrained/opus-mt-en-de or google/flan-t5-small into pretrained/flan-t5-small, where the app "
                    "lists it. The folder "
                    "appears only once it is complete and checked. Needs huggingface_hub (pip install "
                    "huggingface_hub).",
    )
    fetch.add_argument("repo_id", help="the model's id on the Hub, owner/name, e.g. Helsinki-NLP/opus-mt-en-de")
    fetch.add_argument("--out", metavar="DIR", default=None,
                       help=f"the folder to put the model folder in (default: {DEFAULT_OUT})")
    fetch.add_argument("--revision", metavar="REV", default=None,
                       help="a branch, tag or commit hash of the model repository (default: main)")
    fetch.add_argument("--force", action="store_true", help="replace the model folder if it already exists")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (2 with a message on stderr when the download fails)."""
    args = build_parser().parse_args(argv)
    try:
        folder = download(args.repo_id, out=args.out, revision=args.revision, force=args.force)
    except DownloadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"Downloaded {args.repo_id} to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
