"""Charts for the tokenization page: pieces as coloured chips, tables of pieces and vocabularies.

A tokenizer maps text to pieces and pieces to ids; some pieces are reserved (<pad>, <unk>, <s>,
</s>: ids 0..3 in our own vocabularies, others in a Marian model's). SentencePiece marks the start of
a word with "▁".
"""

from __future__ import annotations

import html
from collections.abc import Collection, Mapping, Sequence

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


def chip_color(token_id: int, piece: str = "", special: bool = False) -> str:
    """A light colour per id, stable across reruns and pages; reserved pieces are grey, <unk> red
    (told by the piece, so that any vocabulary's special ids are coloured alike; ``special``: the tokenizer says
    so, as a decoder-only model's says of its BOS, EOS and chat markers)."""
    if piece == UNK_PIECE:
        return "hsl(0, 85%, 80%)"
    if special or piece in SPECIAL_PIECES:
        return "hsl(0, 0%, 85%)"
    return f"hsl({(token_id * 137) % 360}, 70%, 85%)"


def chips_html(pieces: Sequence[str], ids: Sequence[int], special: Collection[int] = ()) -> str:
    """Pieces as inline coloured chips, each with its id underneath (HTML for st.markdown); the ids in ``special``
    grey, as the reserved pieces."""
    if len(pieces) != len(ids):
        raise ValueError(f"{len(pieces)} pieces but {len(ids)} ids")
    chips = []
    for piece, token_id in zip(pieces, ids, strict=True):
        chips.append(
            f'<span class="token-chip" title="id {int(token_id)}" style="display:inline-block;'
            f"background:{chip_color(int(token_id), piece, int(token_id) in special)};"
            "border-radius:6px;padding:2px 7px;margin:2px;"
            f'font-family:monospace;text-align:center;line-height:1.2">'
            f"{html.escape(visible_piece(piece))}<br><small>{int(token_id)}</small></span>"
        )
    return '<div class="token-chips">' + "".join(chips) + "</div>"


def tokens_frame(pieces: Sequence[str], ids: Sequence[int]) -> pd.DataFrame:
    """One row per token: position, piece, id."""
    return pd.DataFrame({"position": range(len(pieces)), "piece": list(pieces), "id": [int(i) for i in ids]})


def stored_tokens_frame(readable: Sequence[str], stored: Sequence[str], ids: Sequence[int],
                        special: Collection[int] = ()) -> pd.DataFrame:
    """One row per token of a decoder-only model: position, the piece as the page writes it ("␣world"), as the
    tokenizer stores it ("Ġworld", "▁world", "<0xE2>"), its id, and whether the tokenizer calls it special."""
    return pd.DataFrame({"position": range(len(ids)), "piece": list(readable), "stored as": list(stored),
                         "id": [int(i) for i in ids], "special": [int(i) in special for i in ids]})


READABLE_MARKS = ("A byte-level tokenizer stores a piece as bytes written with printable stand-ins (\"Ġworld\" for "
                  "\" world\", \"Ċ\" for a line break), a SentencePiece one marks a word's start with \"▁\". The "
                  "page writes every piece as the text it stands for: ␣ a space, ↵ a line break, ⇥ a tab, and "
                  "<0xNN> a byte that is no character on its own (a byte-fallback piece for a character the "
                  "vocabulary lacks, or one byte of a character split over several pieces).")


def lm_special_text(special_tokens: Mapping[str, str], ids: Mapping[str, int | None], n_special: int) -> str:
    """A decoder-only tokenizer's special tokens in words: its named roles ("`<s>` 1 (BOS)", "`</s>` 2 (EOS)", one
    token may hold several) and how many more ids it calls special (chat markers, image tokens)."""
    roles = {"bos_token": "BOS: begins a text", "eos_token": "EOS: ends one", "pad_token": "padding",
             "unk_token": "unknown"}
    named: dict[tuple[str, int], list[str]] = {}
    for key, role in roles.items():
        if special_tokens.get(key) is not None and ids.get(key) is not None:
            named.setdefault((special_tokens[key], int(ids[key])), []).append(role)
    said = [f"`{piece}` {i} ({', '.join(what)})" for (piece, i), what in sorted(named.items(), key=lambda e: e[0][1])]
    others = n_special - len(named)
    if others > 0:
        said.append(f"{plural(others, 'other special id')} (chat markers and other reserved tokens)")
    return ", ".join(said) or "none"


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
