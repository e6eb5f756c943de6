"""Charts for the tokenization page: pieces as coloured chips, tables of pieces and vocabularies.

A tokenizer maps text to pieces and pieces to ids; some pieces are reserved (<pad>, <unk>, <s>,
</s>: ids 0..3 in our own vocabularies, others in a Marian model's). SentencePiece marks the start of
a word with "▁".
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import pandas as pd

from transformer.text.ids import SPECIAL_PIECES, UNK_PIECE


def visible_piece(piece: str) -> str:
    """A piece as a widget label can show it: a space (or a lone SentencePiece "▁") becomes "␣"."""
    return piece.replace(" ", "␣") if piece.strip(" ▁") else "␣" * max(1, len(piece))


def plural(n: int, noun: str) -> str:
    """ "1 character", "2 characters": a count with its noun in the right number."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def special_ids_text(config, tokenizer) -> str:
    """The model's reserved ids in words, e.g. "`<pad>` 0, `<unk>` 1, `<s>` 2 (the decoder's start), `</s>` 3"
    (``config``: a TransformerConfig; ``tokenizer``: the target side's, which names the pieces)."""
    roles = {}
    for name in ("pad_id", "unk_id", "bos_id", "eos_id"):
        roles.setdefault(int(getattr(config, name)), []).append(name)
    said = []
    for i in sorted(roles):
        start = " (the decoder's start)" if "bos_id" in roles[i] else ""
        said.append(f"`{tokenizer.id_to_piece(i)}` {i}{start}")
    return ", ".join(said)


def unknown_notice(src_ids: Sequence[int], unk_id: int, unk_piece: str, characters: Sequence[str] = ()) -> str:
    """What a reader is told when the source holds the model's unknown token (id ``unk_id``, piece ``unk_piece``),
    for every family alike: how many tokens, the id, and the characters behind them where the pipeline found them
    (``characters``: those that became it on their own; a piece may become it only in context, e.g. a word the
    SentencePiece model knows but the model's vocabulary lacks). "" where no token is unknown."""
    count = sum(1 for i in src_ids if int(i) == int(unk_id))
    if not count:
        return ""
    which = (f"characters its vocabulary lacks: {' '.join(repr(c) for c in characters)}" if characters
             else "a part of the input that its vocabulary has no piece for")
    return (f"{plural(count, 'source token')} became `{unk_piece}`, this model's unknown token (id {int(unk_id)}), "
            f"from {which}. The model reads them all as the same token: expect a poor translation.")


def chip_color(token_id: int, piece: str = "") -> str:
    """A light colour per id, stable across reruns and pages; reserved pieces are grey, <unk> red
    (told by the piece, so that any vocabulary's special ids are coloured alike)."""
    if piece == UNK_PIECE:
        return "hsl(0, 85%, 80%)"
    if piece in SPECIAL_PIECES:
        return "hsl(0, 0%, 85%)"
    return f"hsl({(token_id * 137) % 360}, 70%, 85%)"


def chips_html(pieces: Sequence[str], ids: Sequence[int]) -> str:
    """Pieces as inline coloured chips, each with its id underneath (HTML for st.markdown)."""
    if len(pieces) != len(ids):
        raise ValueError(f"{len(pieces)} pieces but {len(ids)} ids")
    chips = []
    for piece, token_id in zip(pieces, ids, strict=True):
        chips.append(
            f'<span class="token-chip" title="id {int(token_id)}" style="display:inline-block;'
            f"background:{chip_color(int(token_id), piece)};border-radius:6px;padding:2px 7px;margin:2px;"
            f'font-family:monospace;text-align:center;line-height:1.2">'
            f"{html.escape(visible_piece(piece))}<br><small>{int(token_id)}</small></span>"
        )
    return '<div class="token-chips">' + "".join(chips) + "</div>"


def tokens_frame(pieces: Sequence[str], ids: Sequence[int]) -> pd.DataFrame:
    """One row per token: position, piece, id."""
    return pd.DataFrame({"position": range(len(pieces)), "piece": list(pieces), "id": [int(i) for i in ids]})


def search_vocab(vocab: pd.DataFrame, query: str = "") -> pd.DataFrame:
    """The rows of a vocabulary table (id, piece, score) whose piece contains ``query``; an id
    written as a number also finds that id."""
    query = query.strip()
    if not query:
        return vocab
    hits = vocab["piece"].astype(str).str.contains(query, case=False, regex=False)
    if query.isdigit():
        hits |= vocab["id"] == int(query)
    return vocab[hits]


def split_comparison(splits: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    """How several tokenizers split one text: one row per tokenizer, its piece count and pieces."""
    return pd.DataFrame({
        "tokenizer": list(splits),
        "pieces": [len(p) for p in splits.values()],
        "split": [" | ".join(p) for p in splits.values()],
    })
