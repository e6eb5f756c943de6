"""The encoder-decoder Transformer of "Attention Is All You Need" (figure 1), or its decoder alone.

    src ids -> Embedding * sqrt(d_model) + PE -> N x EncoderLayer -> LayerNorm = memory
    tgt ids -> Embedding * sqrt(d_model) + PE -> N x DecoderLayer(memory) -> LayerNorm -> Linear = logits

A decoder-only language model (``decoder_only``: GPT-2, Llama, Mistral, Qwen, Gemma) is the same class with one
stack: no source embedding, no encoder, no cross-attention. ``model.lm(ids)`` gives its logits (B, L, V) (and
``model(None, ids)`` the same); its sites are the decoder's (``tgt.*``, ``decoder.*``), so
``trace.attention("decoder", layer)`` reads its attention. Its masks are causal, within a sliding window for
the layers that have one, and blind to left padding (``attention_mask``, as ``transformers`` takes it).

The config's switches cover real translation models too (Marian / opus-mt: SiLU, its sinusoid layout,
no final LayerNorm, the generator tied to the target embedding, its bias = ``final_logits_bias``; BART and
mBART: learned positions and an embedding LayerNorm; M2M100 / NLLB: fairseq's sinusoid; T5: relative
position buckets, RMSNorm, a gated feed-forward, no attention scale and no biases; docs/architecture.md).

``forward`` is teacher forcing (the whole target at once, causally masked);
``encode`` and ``decode`` are the two halves, for step-wise generation with a KVCache.
Each value passes through ``site(name, value, trace)`` (sites.py): where a trace reads it and ``intervene``
may edit it, under one name.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from contextlib import nullcontext

import torch
from torch import Tensor, nn

from . import masks
from .attention import KVCache
from .config import TransformerConfig
from .interventions import intervene
from .layers import Decoder, Encoder
from .norms import initial_weight, is_norm
from .positional import PositionalEncoding, position_scheme, scale_embedding
from .sites import Edit, attention_name, site
from .trace import Trace

# Heads to switch off for one call, as the user names them: {("cross", 1): [0, 2]}.
Ablation = Mapping[tuple[str, int], Collection[int]]


class Generator(nn.Linear):
    """The pre-softmax linear transformation (section 3.4); with ``logit_softcap`` the logits soft-capped,
    cap * tanh(logits / cap) (Gemma-2), so that every path from the decoder's output to the logits (the logit
    lens, the gradient methods) goes through the cap."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__(config.d_model, config.tgt_vocab_size)
        self.softcap = config.logit_softcap

    def forward(self, x: Tensor) -> Tensor:
        logits = super().forward(x)
        return logits if self.softcap is None else torch.tanh(logits / self.softcap) * self.softcap


class Transformer(nn.Module):
    """Encoder-decoder Transformer, or decoder-only. Never stores per-call state: traces and caches are arguments."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.src_embed = None if c.decoder_only else nn.Embedding(c.src_vocab_size, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab_size, c.d_model)
        self.positional = PositionalEncoding(c)
        self.encoder = None if c.decoder_only else Encoder(c)
        self.decoder = Decoder(c)
        self.generator = Generator(c)
        self.reset_parameters()
        self.tie_weights()

    def tie_weights(self) -> None:
        """Section 3.4: the matrices ``config.tying`` names are one (``"all"``: both embeddings and the generator;
        ``"generator"``: the generator is the target embedding, Marian with two vocabularies; ``"embeddings"``: the
        two embeddings, T5 v1.1). Called again after ``to_empty``, which gives every parameter a tensor of its own."""
        if self.config.shared_embeddings:
            self.tgt_embed.weight = self.src_embed.weight
        if self.config.generator_tied:
            self.generator.weight = self.tgt_embed.weight

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Initialise every parameter by ``init_parameters``' rules, drawing from ``generator`` (default: torch's
        global one). With a generator the model is reproducible without touching the process-wide generator,
        which the app's other sessions share (build on the meta device, ``to_empty``, then call this)."""
        init_parameters(self, generator=generator)

    def forward(
        self,
        src_ids: Tensor | None,
        tgt_ids: Tensor,
        *,
        trace: Trace | None = None,
        ablate: Ablation | None = None,
    ) -> Tensor:
        """src_ids: (B, S) int64, tgt_ids: (B, T) int64 -> logits (B, T, tgt_vocab_size).

        ``trace`` is filled with every intermediate (see trace.py); ``ablate`` switches off
        heads for this call only, e.g. ``{("encoder", 0): [1], ("cross", 2): [0, 3]}``.
        A decoder-only model takes ``src_ids=None``: ``model(None, ids)`` is ``model.lm(ids)``.
        """
        if self.config.decoder_only:
            if src_ids is not None:
                raise ValueError("a decoder-only model has no source: call model.lm(ids) or model(None, ids)")
            return self.lm(tgt_ids, trace=trace, ablate=ablate)
        memory = self.encode(src_ids, trace=trace, ablate=ablate)
        return self.decode(tgt_ids, memory, self.memory_mask(src_ids), trace=trace, ablate=ablate)

    def lm(self, ids: Tensor, *, attention_mask: Tensor | None = None, trace: Trace | None = None,
           ablate: Ablation | None = None) -> Tensor:
        """A decoder-only model's language-model logits: ids (B, L) int64 -> (B, L, V), row t the distribution
        of token t + 1. ``attention_mask`` (B, L), 1 or True at tokens and 0 at padding (left padding, as
        ``transformers`` takes it): padding is never attended to, and each row's positions count from its
        first token, so a padded row gives the logits it gives alone."""
        if not self.config.decoder_only:
            raise ValueError("model.lm is the forward of a decoder-only model; this one has an encoder: "
                             "model(src_ids, tgt_ids)")
        return self.decode(ids, None, None, trace=trace, ablate=ablate, attention_mask=attention_mask)

    def decoder_states(self, src_ids: Tensor | None, tgt_ids: Tensor, *, ablate: Ablation | None = None) -> Tensor:
        """The decoder's output before the generator: (B, T, d_model). Methods that need one token's
        log-probability and its gradient (integrated gradients at a 58k-word vocabulary) apply the
        generator to the rows they explain only. A decoder-only model: ``src_ids=None``."""
        if self.config.decoder_only:
            return self.decode_states(tgt_ids, None, None, ablate=ablate)
        memory = self.encode(src_ids, ablate=ablate)
        return self.decode_states(tgt_ids, memory, self.memory_mask(src_ids), ablate=ablate)

    def memory_mask(self, src_ids: Tensor) -> Tensor:
        """Which source positions cross-attention may see: (B, 1, 1, S), True = real token."""
        return masks.memory_mask(src_ids, self.config.pad_id)

    def encode(self, src_ids: Tensor, *, trace: Trace | None = None, ablate: Ablation | None = None) -> Tensor:
        """src_ids: (B, S) -> memory (B, S, d_model), the encoder output."""
        with self._ablating(ablate):
            src_ids = site("src.ids", src_ids, trace)
            mask = site("encoder.mask", masks.padding_mask(src_ids, self.config.pad_id), trace)  # (B, 1, 1, S)
            x = self._embed("src", self.src_embed, src_ids, 0, trace)
            return site("encoder.output", self.encoder(x, mask, trace), trace)

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor | None,
        memory_mask: Tensor | None,
        *,
        cache: KVCache | None = None,
        trace: Trace | None = None,
        ablate: Ablation | None = None,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """tgt_ids: (B, T), memory: (B, S, D), memory_mask: (B, 1, 1, S) -> logits (B, T, V); a decoder-only
        model: memory and memory_mask None, ``attention_mask`` as ``lm`` takes it.

        Without a cache, ``tgt_ids`` is the whole decoder input and the causal and padding
        masks apply. With a ``cache``, ``tgt_ids`` holds only the new positions after
        ``cache.offset`` earlier ones; only the causal mask applies (generated prefixes hold no
        padding; a decoder-only model's ``attention_mask`` then covers the cached positions and the new ones)
        and the cache is extended.
        """
        hidden = self.decode_states(tgt_ids, memory, memory_mask, cache=cache, trace=trace, ablate=ablate,
                                    attention_mask=attention_mask)
        return site("logits", self.generator(hidden), trace)

    def decode_states(self, tgt_ids: Tensor, memory: Tensor | None, memory_mask: Tensor | None, *,
                      cache: KVCache | None = None, trace: Trace | None = None,
                      ablate: Ablation | None = None, attention_mask: Tensor | None = None) -> Tensor:
        """``decode`` up to the generator: the site ``decoder.output``, (B, T, d_model)."""
        offset = cache.offset if cache is not None else 0
        t = tgt_ids.size(1)
        with self._ablating(ablate):
            tgt_ids = site("tgt.ids", tgt_ids, trace)
            if self.config.decoder_only:
                self_mask, positions = self._lm_masks(tgt_ids, offset, attention_mask, trace)
            else:
                self_mask, positions = self._decoder_mask(tgt_ids, cache, offset, trace), None
            if memory_mask is not None:
                memory_mask = site("cross.mask", memory_mask, trace)
            # added positions: each row's own where an attention_mask says where its tokens start, a single row too
            x = self._embed("tgt", self.tgt_embed, tgt_ids, offset, trace,
                            positions if attention_mask is not None else None)
            hidden = site("decoder.output", self.decoder(x, memory, self_mask, memory_mask, trace, cache, positions),
                          trace)
        if cache is not None:
            cache.offset += t
        return hidden

    def _decoder_mask(self, tgt_ids: Tensor, cache: KVCache | None, offset: int, trace: Trace | None
                      ) -> Tensor | None:
        """An encoder-decoder's self-attention mask (site ``decoder.mask``): causal and padding, or causal only
        with a cache (none for one new query, which may see every earlier position)."""
        t = tgt_ids.size(1)
        if cache is None:
            self_mask = masks.decoder_self_mask(tgt_ids, self.config.pad_id)  # (B, 1, T, T)
        elif t > 1:
            self_mask = masks.causal_mask(t, offset + t, device=tgt_ids.device)  # (1, 1, T, offset+T)
        else:
            return None
        return site("decoder.mask", self_mask, trace)

    def _lm_masks(self, ids: Tensor, offset: int, attention_mask: Tensor | None, trace: Trace | None
                  ) -> tuple[dict[str, Tensor], Tensor]:
        """A decoder-only model's masks per layer type (sites ``decoder.mask``, ``decoder.sliding_mask``) and its
        positions (B|1, T): offset.. without ``attention_mask``, else each row's count of tokens before."""
        c, t = self.config, ids.size(1)
        real, positions = None, torch.arange(offset, offset + t, device=ids.device)[None]  # (1, T)
        if attention_mask is not None:
            if attention_mask.shape != (ids.size(0), offset + t):
                raise ValueError(f"attention_mask must be (batch, {offset + t}) for these ids"
                                 f"{' and the cached positions' if offset else ''}, got {tuple(attention_mask.shape)}")
            real = attention_mask.bool()  # (B, offset + T)
            positions = (real.long().cumsum(-1) - 1).clamp(min=0)[:, offset:]  # (B, T)
        kinds = {c.layer_type(i) for i in range(c.n_decoder_layers)}
        self_masks = {"full": masks.lm_mask(real, t, offset + t, device=ids.device)}
        if "sliding" in kinds:
            self_masks["sliding"] = masks.lm_mask(real, t, offset + t, c.sliding_window, device=ids.device)
        self_masks = {kind: site("decoder.mask" if kind == "full" else "decoder.sliding_mask", mask, trace)
                      for kind, mask in self_masks.items()}
        return self_masks, positions

    def _embed(self, side: str, embedding: nn.Embedding, ids: Tensor, offset: int, trace: Trace | None,
               positions: Tensor | None = None) -> Tensor:
        """Section 3.4-3.5: Embedding(ids) * sqrt(d_model) + PE: (B, L, d_model); the stack then applies its
        embedding norm and dropout (the first layer's input). Sites ``{side}.tokens``, ``.embed``, ``.pos``.
        ``positions``: each row's own, a decoder-only model's (rotary positions add nothing here)."""
        c = self.config
        tokens = site(f"{side}.tokens", embedding(ids), trace)
        embed = site(f"{side}.embed", scale_embedding(tokens, c.d_model, c.scale_embedding,
                                                      c.embedding_scale_rounded), trace)
        shared = positions is None or position_scheme(c) != "added"
        return self.positional(embed, offset, trace=trace, side=side, positions=None if shared else positions)

    def _ablating(self, ablate: Ablation | None):  # noqa: ANN202  (a context manager)
        """``intervene`` with the edits that switch the heads of ``ablate`` off (``ablation_edits``); none: nothing."""
        return intervene(self.ablation_edits(ablate)) if ablate else nullcontext()

    def ablation_edits(self, ablate: Ablation) -> dict[str, Edit]:
        """The user's ablation, checked, as edits of the ``{attention}.heads`` sites: each head switched off
        is multiplied by 0 before W^O mixes the heads (interventions.py)."""
        c = self.config
        heads_off: dict[str, set[int]] = {}
        for key, heads in ablate.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(f"ablate keys are (kind, layer) pairs like ('cross', 0), got {key!r}")
            kind, layer = key
            n_layers = c.n_encoder_layers if kind == "encoder" else c.n_decoder_layers
            name = attention_name(kind, layer)
            if c.decoder_only and kind != "decoder":
                raise ValueError(f"a decoder-only model has no {kind} attention; its heads are ('decoder', layer)")
            if not (isinstance(layer, int) and 0 <= layer < n_layers):
                raise ValueError(f"{kind} layer must be in 0..{n_layers - 1}, got {layer!r}")
            bad = [h for h in heads if not (isinstance(h, int) and 0 <= h < c.n_heads)]
            if bad:
                raise ValueError(f"head indices must be in 0..{c.n_heads - 1}, got {bad}")
            heads_off.setdefault(f"{name}.heads", set()).update(heads)
        return {site: _silencing(sorted(off), c.n_heads) for site, off in heads_off.items() if off}

    def num_parameters(self) -> int:
        """Distinct trainable parameters (tied weights counted once)."""
        return sum(p.numel() for p in self.parameters())


def count_parameters(model: Transformer) -> dict[str, int]:
    """Parameters per part, for the model page: embeddings, the learned position tables where the model has them
    (BART, mBART: a ``positional`` part; no entry for a sinusoid, which is no parameter), encoder (with its
    embedding norm and T5's relative bias table), decoder, generator. Tied weights count once, in the first part
    that holds them, so the parts sum to ``num_parameters``."""
    seen: set[int] = set()
    parts: dict[str, int] = {}
    for part in ("src_embed", "tgt_embed", "positional", "encoder", "decoder", "generator"):
        total = 0
        module = getattr(model, part)
        if module is None:  # a decoder-only model's source embedding and encoder
            continue
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        if total or part != "positional":
            parts[part] = total
    return parts


def _silencing(heads: list[int], n_heads: int) -> Edit:
    """An edit of a ``.heads`` site (B, H, T, d_k) that multiplies the given heads by 0."""

    def edit(value: Tensor) -> Tensor:
        gate = torch.ones(n_heads, dtype=value.dtype, device=value.device)
        gate[heads] = 0.0
        return value * gate[None, :, None, None]

    return edit


def init_parameters(module: nn.Module, *, generator: torch.Generator | None = None,
                    only: Collection[nn.Parameter] | None = None) -> None:
    """Draw ``module``'s parameters from their initial distributions: the one place the rule is written, used
    by the model's own initialisation and by the randomization check (explain/sanity.py).

    Xavier for every matrix, as torch.nn.Transformer does; embeddings N(0, 1/d_model) so that
    embedding * sqrt(d_model) has unit scale, like the positional encoding (and the learned position tables
    and T5's relative bias table, nn.Embeddings too, by the same rule); LayerNorm and RMSNorm 1 and 0 (a
    constant, not a draw); other biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), nn.Linear's own rule. A tied
    matrix is drawn once, by the rule of its first owner in module order (the source embedding). ``only``:
    draw just these parameters, each still by its first owner's rule, in the same order.

    ``generator`` (default: torch's global one for the parameter's device) may live on another device than the
    parameters: each value is then drawn on the generator's device and copied over, so a seed gives the same
    weights on every device (a CPU generator, a model on CUDA).
    """
    chosen = None if only is None else {id(p) for p in only}
    seen: set[int] = set()
    with torch.no_grad():
        for owner in module.modules():
            for kind, p in owner.named_parameters(recurse=False):
                if id(p) in seen:  # a tied matrix: drawn by its first owner
                    continue
                seen.add(id(p))
                if chosen is not None and id(p) not in chosen:
                    continue
                if isinstance(owner, nn.Embedding):  # std 1/sqrt(d_model)
                    std = owner.embedding_dim**-0.5
                    _draw(p, generator, lambda t: nn.init.normal_(t, std=std, generator=generator))
                elif p.dim() > 1:
                    _draw(p, generator, lambda t: nn.init.xavier_uniform_(t, generator=generator))
                elif is_norm(owner):
                    nn.init.constant_(p, initial_weight(owner)) if kind == "weight" else nn.init.zeros_(p)
                else:  # a bias: bound 1/sqrt(fan_in)
                    bound = owner.weight.size(1) ** -0.5
                    _draw(p, generator, lambda t: nn.init.uniform_(t, -bound, bound, generator=generator))


def _draw(p: Tensor, generator: torch.Generator | None, fill: Callable[[Tensor], object]) -> None:
    """Fill ``p`` in place by ``fill``, on the generator's device when it has one elsewhere (then copied)."""
    if generator is None or generator.device == p.device or p.is_meta:
        fill(p)
        return
    drawn = torch.empty(p.shape, dtype=p.dtype, device=generator.device)
    fill(drawn)
    p.copy_(drawn)
