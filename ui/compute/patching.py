"""The Patching page's computations: activation patching of a corrupted input towards the analysed one, and the
corrupted twins it suggests (a pair of the model's task, a grammatical corruption, one token changed).

The patching is kept per model, input pair and position as shared work (``shared_work.shared``: a progress bar, in
public mode a place in the heavy-work pool and the time budget, its cut said on the page) and never modified after
it is built: at the largest sizes a model may have it is thousands of forwards.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import torch

from transformer import explain
from transformer.explain.patching import lm_activation_patching
from transformer.explain.progress import Progress
from transformer.pipeline import Pipeline
from ui.compute.analysis import Analysis, builtin_task
from ui.compute.explain import explained_ids
from ui.compute.shared_work import shared

# Pairs of inputs that differ in one token, per built-in task: the clean input and its corrupted twin.
SUGGESTED_PAIRS = {
    "reverse": [("abc123xyz", "abc124xyz"), ("hello42", "hallo42")],
    "copy": [("abc123xyz", "abc124xyz"), ("hello42", "hallo42")],
    "sort": [("zebra42", "zebro42"), ("hello42", "hallo42")],
    "dates": [("2026-11-21", "2026-03-21"), ("1999-12-31", "1999-12-30")],
    "numbers": [("three hundred and forty-seven", "three hundred and forty-eight"),
                ("two thousand and twelve", "two thousand and eleven")],
    "sentences": [("the dog sees the cat", "the dog sees the man"),
                  ("the small dog sees the cat because the man sleeps",
                   "the small dog sees the cat because the man runs")],
}



# A language model's pair (Wang et al. 2022, "Interpretability in the Wild": indirect-object identification): the
# clean prompt should continue with " Mary" (the name not repeated), its twin with the names swapped with " John".
IOI_PAIR = ("When Mary and John went to the store, John gave a drink to",
            "When John and Mary went to the store, Mary gave a drink to")
LM_METRICS = {"swapped": "the two swapped tokens (the clean prompt's token minus the corrupted one's)",
              "predicted": "the two runs' most likely next tokens"}
_NAME = re.compile(r"(?<![\w'])([A-Z][a-z]+)(?![\w'])")


def swap_names(text: str) -> str | None:
    """``text`` with its first two names swapped everywhere ("When Mary and John went..., John gave" -> "When John
    and Mary went..., Mary gave"): the capitalised words that do not open a sentence. None with fewer than two."""
    names: list[str] = []
    for match in _NAME.finditer(text):
        before = text[: match.start()].rstrip()
        if before and before[-1] not in ".!?" and match.group(1) not in names:
            names.append(match.group(1))
    if len(names) < 2:
        return None
    a, b = names[:2]
    return _NAME.sub(lambda m: b if m.group(1) == a else a if m.group(1) == b else m.group(1), text)


def lm_pair(pipeline: Any, clean: str, corrupt: str, *, chat: bool = False) -> tuple[list[int], list[int], int, int]:
    """A language model's prompt pair as ids (clean, corrupted; ``chat``: each through the chat template, as the
    sidebar's analysis reads the prompt) and the swapped tokens (answer: the clean prompt's token at the first
    position where they differ, wrong: the corrupted one's there). ValueError, said on the page, where the two have
    different token counts or are the same."""
    clean_ids, corrupt_ids = pipeline.prompt_ids(clean, chat=chat), pipeline.prompt_ids(corrupt, chat=chat)
    if len(clean_ids) != len(corrupt_ids):
        raise ValueError(f"the corrupted prompt has {len(corrupt_ids)} tokens, the clean one {len(clean_ids)}: "
                         "patching pairs positions one to one, so it needs as many (swap words that are one token "
                         "each, or as many tokens)")
    differ = [i for i, (a, b) in enumerate(zip(clean_ids, corrupt_ids, strict=True)) if a != b]
    if not differ:
        raise ValueError("the two prompts give the same tokens: there is no difference to restore")
    return clean_ids, corrupt_ids, clean_ids[differ[0]], corrupt_ids[differ[0]]


def _lm_patching(pipeline: Any, clean: str, corrupt: str, metric: str, chat: bool, progress: Progress
                 ) -> pd.DataFrame:
    clean_ids, corrupt_ids, answer, wrong = lm_pair(pipeline, clean, corrupt, chat=chat)
    tokens = dict(answer=answer, wrong=wrong) if metric == "swapped" else {}
    device_ = pipeline.device
    return lm_activation_patching(pipeline.model, torch.tensor([clean_ids], device=device_),
                                  torch.tensor([corrupt_ids], device=device_), progress=progress, **tokens)


def lm_patching(model_key: str, device: str, pipeline: Any, clean: str, corrupt: str, metric: str, *,
                chat: bool = False) -> pd.DataFrame:
    """``lm_activation_patching`` of a language model's corrupted prompt towards the clean one (``chat``: both through
    the chat template), the logit difference
    read at the last position between the two swapped tokens (``metric="swapped"``) or the two runs' predictions
    (``"predicted"``); shared work, kept per model, pair and metric. ``.attrs``: answer, wrong and both runs'
    logit differences. ValueError (a message for the page) for a pair ``lm_pair`` refuses."""
    return shared("lm-patching", (model_key, device, clean, corrupt, metric, chat),
                  lambda progress: _lm_patching(pipeline, clean, corrupt, metric, chat, progress),
                  label="Patching every activation:", max_entries=64,
                  advice="Try a shorter prompt, or a smaller model.")


def suggested_pairs(pipeline: Pipeline) -> list[tuple[str, str]]:
    """Clean/corrupted input pairs that differ in one token, for the model's task (none for a user's file)."""
    return SUGGESTED_PAIRS.get(builtin_task(pipeline) or "", [])


def _patching(pipeline: Pipeline, clean: Analysis, corrupt: str, position: int, progress: Progress) -> pd.DataFrame:
    src, tgt = explained_ids(clean)
    corrupt_src = pipeline.encode_source(corrupt, warn=False)  # a corrupted input may leave the domain on purpose
    device_ = pipeline.device
    return explain.activation_patching(pipeline.model, src.to(device_), corrupt_src.to(device_), tgt.to(device_),
                                       position, progress=progress)


def patching(model_key: str, device: str, pipeline: Pipeline, clean: Analysis, corrupt_text: str,
             position: int) -> pd.DataFrame:
    """``activation_patching`` of ``corrupt_text`` towards the clean analysed input, explaining output ``position``.

    Raises ValueError (a message for the page) when the two inputs have different token lengths or the
    position is out of range.
    """
    return shared("patching", (model_key, device, clean.text, corrupt_text, position),
                  lambda progress: _patching(pipeline, clean, corrupt_text, position, progress),
                  label="Patching every activation:", max_entries=64,
                  advice="Try a shorter input, or a smaller model.")


def first_difference(clean: Analysis, corrupt: Analysis) -> int:
    """The first output row where the two translations differ (0 when they agree everywhere)."""
    for t, (a, b) in enumerate(zip(clean.output_tokens, corrupt.output_tokens, strict=False)):
        if a != b:
            return t
    return 0


def strongest(patching: pd.DataFrame, src_tokens: list[str], dec_tokens: list[str], n: int = 3, *,
              lm: bool = False) -> list[str]:
    """The ``n`` sites with the largest effect, in words, e.g. "encoder layer 1 output at source 3 (c): 0.92";
    ``lm``: a decoder-only model's one stack, "layer 1 output at position 3 (c): 0.92"."""
    defined = patching.dropna(subset=["effect"])
    rows = defined.loc[defined["effect"].abs().sort_values(ascending=False).index].head(n)
    said = []
    for row in rows.itertuples():
        tokens, where = ((src_tokens, "source") if row.kind == "encoder" else
                         (dec_tokens, "position" if lm else "decoder position"))
        token = tokens[row.position] if 0 <= row.position < len(tokens) else "?"
        stack = "layer" if lm else f"{row.kind} layer"
        what = (f"{stack} {row.layer} output" if row.component == "layer_output"
                else f"{stack} {row.layer} head {row.head}")
        said.append(f"{what} at {where} {row.position} ({token}): {row.effect:.2f}")
    return said


def _kind(piece: str) -> str:
    core = piece.replace("▁", "")
    return "digit" if core.isdigit() else "alpha" if core.isalpha() else "other"


def _same_kind_words(word: str) -> list[str]:
    """Words of the sentences grammar of the same part of speech and number as ``word`` (a noun for a noun,
    a plural verb of the same valency for a plural verb, an adjective for an adjective), or []."""
    from transformer.text import sentences as grammar

    plural_nouns = {forms[0] for forms in grammar.NOUNS.values()}
    plural_verbs = {forms[0]: forms[3] for forms in grammar.VERBS.values()}
    if word in grammar.NOUNS:
        same = list(grammar.NOUNS)
    elif word in plural_nouns:
        same = sorted(plural_nouns)
    elif word in grammar.VERBS:
        same = [v for v, forms in grammar.VERBS.items() if forms[3] == grammar.VERBS[word][3]]
    elif word in plural_verbs:
        same = [v for v, kind in plural_verbs.items() if kind == plural_verbs[word]]
    elif word in grammar.ADJECTIVES:
        same = list(grammar.ADJECTIVES)
    else:
        return []
    return [w for w in same if w != word]


def grammatical_corruption(pipeline: Pipeline, text: str) -> str | None:
    """For a model of the sentences task: ``text`` with its last noun (else verb, else adjective) replaced by
    another of the same part of speech and number, so the corrupted input is still a sentence of the grammar
    (it parses) with as many tokens. None when no word allows it."""
    from transformer.text import sentences as grammar

    words = text.split()
    n_tokens = len(pipeline.src_tokenizer.encode(text))
    nouns = set(grammar.NOUNS) | {forms[0] for forms in grammar.NOUNS.values()}
    order = sorted(reversed(range(len(words))), key=lambda i: 0 if words[i] in nouns else
                   1 if words[i].rstrip(",") not in grammar.ADJECTIVES else 2)
    for i in order:
        for candidate in _same_kind_words(words[i]):
            twin = " ".join([*words[:i], candidate, *words[i + 1:]])
            try:
                grammar.parse(twin)  # "a apple" and the like do not parse
            except ValueError:
                continue
            if len(pipeline.src_tokenizer.encode(twin)) == n_tokens:
                return twin
    return None


def _apply_change(text: str, before: str, after: str) -> str | None:
    """``text`` with the one span in which ``before`` (the clean ids decoded) and ``after`` (the twin's) differ
    changed as in ``after``, located from the end (what the tokenizer dropped or normalised earlier, an <unk> of
    T5's prefix, stays as the reader typed it). None where the span cannot be found in ``text``."""
    prefix = 0
    while prefix < min(len(before), len(after)) and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(before), len(after)) - prefix and before[-1 - suffix] == after[-1 - suffix]:
        suffix += 1
    old, new = before[prefix:len(before) - suffix], after[prefix:len(after) - suffix]
    end = len(text) - suffix
    if not text.endswith(before[len(before) - suffix:]) or end < len(old) or text[end - len(old):end] != old:
        return None
    return text[:end - len(old)] + new + text[end:]


def default_corruption(pipeline: Pipeline, text: str) -> str | None:
    """``text`` with one token replaced by another of its kind (digit for digit, letters for letters): a corrupted
    twin for any input. The last token that allows it is changed, to a piece of as close a length as there is;
    the twin must tokenize to the same ids but that one (no second change, no new ``<unk>``) and stay as much in
    the model's domain as ``text`` (dates-de: "2090-01-07" becomes "2090-01-01", never "2090-01-00"; numbers: no
    German piece of a shared vocabulary). None when no replacement does."""
    tokenizer = pipeline.src_tokenizer
    ids = tokenizer.encode(text)
    pieces = [tokenizer.id_to_piece(i) for i in ids]
    unk = pipeline.config.unk_id
    special = set(pipeline.config.special_ids)  # the model's own (0-3 in ours, others in a Marian vocabulary)
    vocabulary = [(i, tokenizer.id_to_piece(i)) for i in range(tokenizer.vocab_size) if i not in special]
    clean_decoded = tokenizer.decode(ids)
    outside = len(pipeline.domain_warnings(text))  # the twin may leave the domain no more than the input
    for position in reversed(range(len(pieces))):
        kind = _kind(pieces[position])
        if kind == "other" or ids[position] == unk:
            continue
        original = len(pieces[position])
        for candidate_id, candidate in sorted(vocabulary, key=lambda c: abs(len(c[1]) - original)):  # a word for a word
            if candidate == pieces[position] or _kind(candidate) != kind or \
                    candidate.startswith("▁") != pieces[position].startswith("▁"):
                continue
            changed = [*ids[:position], candidate_id, *ids[position + 1:]]
            twin = _apply_change(text, clean_decoded, tokenizer.decode(changed))
            if twin is None or twin == text or tokenizer.encode(twin) != changed:
                continue
            if len(pipeline.domain_warnings(twin)) <= outside:
                return twin
    return None
