"""Activation patching (causal tracing): Meng et al. 2022, "Locating and Editing Factual
Associations in GPT", in the logit-difference form of Wang et al. 2022, "Interpretability in
the Wild" (the IOI circuit).

Run the corrupted source; copy one activation from the clean run; see how much of the clean
behaviour comes back at output row ``position`` (decoder position t predicts tgt_ids[t+1]):

    LD = logit(answer) - logit(wrong),  answer = tgt_ids[0, position + 1],
    wrong = the corrupted run's most likely token there (its second most likely when that is
    the answer; PAD never counts, as decoding never produces it),
    effect = (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt)

1 = this activation alone restores the clean logit difference, 0 = it changes nothing.

Sites, named as the network names them (network/sites.py) and each patched at one ``position`` (the query
position for heads): ``encoder.{l}.output`` (each source position), ``decoder.{l}.output`` (each target
position), and each head of ``{attention}.heads`` such as ``decoder.1.cross_attn.heads``, the heads' outputs
before W^O mixes them. ``index`` is the index on the site, as ``trace[site, index]`` reads it: the head of a
``.heads`` site, the position of an output. Each patch is an edit of that site, made for one call inside a
``with intervene(...)`` block; the model is never changed.

Batched: the clean run is row 0 and the corrupted run row 1 of one forward, every patched
copy a further row, and the edit of each intervention site copies row 0's activation into
the rows assigned to it (no module is hooked). Clean values and the reference logit
differences thus come from the same forward as the patched rows, so the exact cases hold to
rounding: the last decoder layer at ``position`` gives 1 (at other positions 0), every
decoder site at a later position gives 0 (the causal mask). "To rounding" because a matrix
product may sum one row of a batch in another order than its neighbours (seen: 9e-16 in
float64); the rows are never exactly re-derived or special-cased. Rows run in chunks of
``chunk_size`` copies, each chunk with its own clean and corrupted rows.

B = 1: one (clean, corrupted) pair of equal length. Identical sources raise ValueError; when
the two logit differences are equal otherwise, every effect is NaN (0 / 0).

A decoder-only language model (``lm_activation_patching``): the clean and corrupted prompts are the same prompt
with one token swapped (a name, as in Wang et al.'s IOI prompts), of equal length; the row is the last position,
whose next token is measured: answer = the clean run's most likely next token, wrong = the corrupted run's (its
second when that is the answer), or both as given. Sites: ``decoder.{l}.output`` and ``decoder.{l}.self_attn.heads``
at every prompt position. The exact cases: the last layer's output at the last position gives 1, every site at a
position before the first swapped token gives 0 (clean and corrupted activations are equal there).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pandas as pd
import torch
from torch import Tensor

from ..network.interventions import Edit, intervene
from ..network.model import Transformer
from ..network.sites import ATTENTION_KINDS, attention_name
from .inputs import check_inputs
from .progress import Progress, tell

COLUMNS = ["site", "index", "position", "effect", "component", "kind", "layer", "head"]


@dataclass(frozen=True)
class Site:
    """One activation at one position: what a patched copy replaces."""

    site: str  # the network's site it edits: "encoder.0.output", "decoder.1.cross_attn.heads"
    position: int  # the position patched (the query position for a head)
    component: str  # "layer_output" or "head"
    kind: str  # "encoder" | "decoder" for outputs; "encoder" | "decoder" | "cross" for heads
    layer: int
    head: int  # -1 for layer outputs

    @property
    def index(self) -> int:
        """The index on the site (``value[:, index]``): the head of a ``.heads`` site, an output's position."""
        return self.head if self.head >= 0 else self.position


def activation_patching(model: Transformer, clean_src: Tensor, corrupt_src: Tensor, tgt_ids: Tensor, position: int,
                        *, chunk_size: int = 512, progress: Progress | None = None) -> pd.DataFrame:
    """clean_src, corrupt_src (1, S); tgt_ids (1, T) = ``<s> y </s>``; position in 0..T-2.
    ``progress`` (progress.py) is told before each forward of ``chunk_size`` patched copies, where a deadline stops
    the work.

    -> one row per site, index and position: site, index (the head of a ``.heads`` site, an output's
    position), position, effect (module docstring), component ("layer_output" | "head"), kind, layer, head
    (-1 for layer outputs).
    """
    if model.config.decoder_only:
        raise ValueError("a decoder-only model has no source: patch its prompts with lm_activation_patching(model, "
                         "clean_ids, corrupt_ids)")
    _check(model, clean_src, corrupt_src, tgt_ids, position)
    sites = list_sites(model, clean_src.size(1), tgt_ids.size(1) - 1)
    dec_ids = tgt_ids[:, :-1]
    answer = int(tgt_ids[0, position + 1])
    wrong = None
    effects: list[float] = []
    for start in range(0, len(sites), chunk_size):
        chunk = sites[start:start + chunk_size]
        tell(progress, start / len(sites), f"sites {start + 1}-{start + len(chunk)} of {len(sites)}")
        src = torch.cat([clean_src, corrupt_src.expand(len(chunk) + 1, -1)])  # (2 + copies, S)
        logits = _patched_forward(model, src, dec_ids.expand(src.size(0), -1), chunk)[:, position]  # (N, V)
        if wrong is None:
            wrong = _wrong_token(logits[1], answer, model.config.pad_id)
        difference = logits[:, answer] - logits[:, wrong]  # (N,)
        clean, corrupt = difference[0], difference[1]
        effects += ((difference[2:] - corrupt) / (clean - corrupt)).tolist()  # 0/0 = NaN when clean == corrupt
    return pd.DataFrame([{"site": s.site, "index": s.index, "position": s.position, "effect": e,
                          "component": s.component, "kind": s.kind, "layer": s.layer, "head": s.head}
                         for s, e in zip(sites, effects, strict=True)],
                        columns=COLUMNS)


def lm_activation_patching(model: Transformer, clean_ids: Tensor, corrupt_ids: Tensor, *, answer: int | None = None,
                           wrong: int | None = None, chunk_size: int = 512, progress: Progress | None = None
                           ) -> pd.DataFrame:
    """A decoder-only model; clean_ids, corrupt_ids (1, L) the same prompt with a token swapped (module docstring).
    The logit difference is read at the last position: answer (default: the clean run's most likely next token)
    minus wrong (default: the corrupted run's most likely, its second when that is the answer).

    -> the columns of ``activation_patching`` (position: the prompt position patched; kind "decoder"), one row per
    site, index and position; ``.attrs`` holds answer, wrong and the clean and corrupted logit differences.
    """
    _check_lm(model, clean_ids, corrupt_ids, answer, wrong)
    sites = list_sites(model, 0, clean_ids.size(1))
    effects: list[float] = []
    for start in range(0, len(sites), chunk_size):
        chunk = sites[start:start + chunk_size]
        tell(progress, start / len(sites), f"sites {start + 1}-{start + len(chunk)} of {len(sites)}")
        ids = torch.cat([clean_ids, corrupt_ids.expand(len(chunk) + 1, -1)])  # (2 + copies, L)
        logits = _patched_forward(model, None, ids, chunk)[:, -1]  # (N, V): the next token after the prompt
        answer = int(logits[0].argmax()) if answer is None else answer
        wrong = _wrong_token(logits[1], answer, None) if wrong is None else wrong
        difference = logits[:, answer] - logits[:, wrong]  # (N,)
        clean, corrupt = difference[0], difference[1]
        effects += ((difference[2:] - corrupt) / (clean - corrupt)).tolist()  # 0/0 = NaN when clean == corrupt
    frame = pd.DataFrame([{"site": s.site, "index": s.index, "position": s.position, "effect": e,
                           "component": s.component, "kind": s.kind, "layer": s.layer, "head": s.head}
                          for s, e in zip(sites, effects, strict=True)], columns=COLUMNS)
    frame.attrs.update(answer=answer, wrong=wrong, clean_difference=float(clean), corrupt_difference=float(corrupt))
    return frame


def list_sites(model: Transformer, src_len: int, dec_len: int) -> list[Site]:
    """Every site at every position, in the order the result lists them."""
    c = model.config
    sites = []
    for stack, length in (("encoder", src_len), ("decoder", dec_len)):
        for layer in range(c.n_encoder_layers if stack == "encoder" else c.n_decoder_layers):
            name = f"{stack}.{layer}.output"
            sites += [Site(name, i, "layer_output", stack, layer, -1) for i in range(length)]
    for kind, (stack, _) in ATTENTION_KINDS.items():
        if c.decoder_only and kind != "decoder":  # one stack, no cross-attention
            continue
        length = src_len if kind == "encoder" else dec_len
        for layer in range(c.n_encoder_layers if stack == "encoder" else c.n_decoder_layers):
            name = f"{attention_name(kind, layer)}.heads"
            sites += [Site(name, i, "head", kind, layer, h) for h in range(c.n_heads) for i in range(length)]
    return sites


def _patched_forward(model: Transformer, src: Tensor | None, dec_ids: Tensor, chunk: list[Site]) -> Tensor:
    """Row 0 clean, row 1 corrupted, row 2 + n patched at ``chunk[n]`` -> logits (N, T', V) (src None: a
    decoder-only model, whose clean and corrupted rows are those of ``dec_ids``)."""
    by_site: dict[str, list[tuple[int, Site]]] = defaultdict(list)
    for n, site in enumerate(chunk):
        by_site[site.site].append((n + 2, site))
    with intervene({name: _copying_clean(entries) for name, entries in by_site.items()}), torch.no_grad():
        return model(src, dec_ids)


def _copying_clean(entries: list[tuple[int, Site]]) -> Edit:
    """An edit that copies row 0's (the clean run's) value into each entry's row at its position (and head):
    a layer output (N, T, D), or the heads (N, H, T, d_k)."""
    groups: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for row, site in entries:
        groups[site.head].append((row, site.position))

    def edit(x: Tensor) -> Tensor:
        x = x.clone()
        for head, pairs in groups.items():
            rows, positions = torch.tensor(pairs, device=x.device).unbind(1)
            if head < 0:
                x[rows, positions] = x[0, positions]
            else:
                x[rows, head, positions] = x[0, head, positions]
        return x

    return edit


def _wrong_token(logits: Tensor, answer: int, pad_id: int | None) -> int:
    """The corrupted run's top token at the row, or its second when the top one is the answer (never PAD; None:
    a language model's, whose pad id may be an ordinary token)."""
    logits = logits.clone()
    if pad_id is not None:
        logits[pad_id] = float("-inf")
    first, second = logits.topk(2).indices.tolist()
    return second if first == answer else first


def _check(model: Transformer, clean_src: Tensor, corrupt_src: Tensor, tgt_ids: Tensor, position: int) -> None:
    for name, src in (("clean_src", clean_src), ("corrupt_src", corrupt_src)):
        check_inputs(model, src, tgt_ids, None)
        if src.size(0) != 1:
            raise ValueError(f"activation patching takes one sentence (B = 1); {name} has batch {src.size(0)}")
    if clean_src.shape != corrupt_src.shape:
        raise ValueError(f"clean and corrupted sources must have equal length (patching copies position by "
                         f"position): got {clean_src.size(1)} and {corrupt_src.size(1)} tokens")
    if torch.equal(clean_src, corrupt_src):
        raise ValueError("clean and corrupted sources are identical: there is no difference to restore")
    rows = tgt_ids.size(1) - 1
    if not (isinstance(position, int) and 0 <= position < rows):
        raise ValueError(f"position must be an output row in 0..{rows - 1} (row t predicts tgt_ids[:, t+1]), "
                         f"got {position!r}")


def _check_lm(model: Transformer, clean_ids: Tensor, corrupt_ids: Tensor, answer: int | None, wrong: int | None
              ) -> None:
    c = model.config
    if not c.decoder_only:
        raise ValueError("lm_activation_patching takes a decoder-only model; an encoder-decoder: activation_patching")
    if model.training:
        raise ValueError("the model is in training mode (dropout is random): call .eval() on it first")
    for name, ids in (("clean_ids", clean_ids), ("corrupt_ids", corrupt_ids)):
        if not isinstance(ids, Tensor) or ids.dim() != 2 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            got = f"{tuple(ids.shape)} {ids.dtype}" if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"{name} must be a 2-D tensor of token ids (1, L), got {got}")
        bad = ids[(ids < 0) | (ids >= c.tgt_vocab_size)]
        if bad.numel() or ids.size(1) == 0:
            raise ValueError(f"{name} must hold at least one id in 0..{c.tgt_vocab_size - 1}, got "
                             f"{sorted(set(bad.tolist())) or 'none'}")
        if ids.size(0) != 1:
            raise ValueError(f"activation patching takes one prompt (B = 1); {name} has batch {ids.size(0)}")
    if clean_ids.shape != corrupt_ids.shape:
        raise ValueError(f"clean and corrupted prompts must have equal length (patching copies position by "
                         f"position): got {clean_ids.size(1)} and {corrupt_ids.size(1)} tokens")
    if torch.equal(clean_ids, corrupt_ids):
        raise ValueError("clean and corrupted prompts are identical: there is no difference to restore")
    for name, token in (("answer", answer), ("wrong", wrong)):
        if token is not None and not (isinstance(token, int) and 0 <= token < c.tgt_vocab_size):
            raise ValueError(f"{name} must be a token id in 0..{c.tgt_vocab_size - 1}, got {token!r}")
    if answer is not None and answer == wrong:
        raise ValueError(f"answer and wrong are the same token ({answer}): their logit difference is always 0")
