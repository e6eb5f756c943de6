"""Hugging Face folders of each family, written by ``transformers``' own ``save_pretrained``, built in the tests.

Two kinds per family (``family_models.NAMES``: t5, t5-v1.1, bart, mbart, m2m100):

- ``random_folder``: the tiny model of ``family_models`` with every weight drawn at random (norms away from 1 and
  0), in float64, with the family's tokenizer (``family_helpers``) and its ids: for parity of logits and attention;
  ``weights="bin"`` writes ``pytorch_model.bin`` instead of ``model.safetensors``.
- ``trained_folder``: a model trained for a few hundred steps to copy short texts (in the tokenizer's own pieces,
  the target language's code first for a multilingual model), so that its outputs end: for decoding parity with
  ``generate()``. Saved in float32, as the Hub's folders are.

The models are built and trained under ``torch.random.fork_rng`` with a fixed seed: the global generator is left
as it was and every run builds the same folders. ``transformers`` is the test-only reference.
"""

from __future__ import annotations

import random
from pathlib import Path

import torch
from family_helpers import WORDS
from family_models import randomize, reference_config

LAYOUTS = {"t5": "t5", "t5-v1.1": "t5", "bart": "bart", "mbart": "mbart50", "m2m100": "nllb"}  # -> tokenizer
LANGUAGES = {"mbart": ("en_XX", "de_DE"), "m2m100": ("eng_Latn", "deu_Latn")}  # (source, target) codes
T5_EXTRA_ROWS = 3  # T5's embedding has rows past its tokenizer's pieces (t5-small: 32128 for 32100)


def tokenizer(name: str, tokenizers: dict[str, Path] | Path):  # noqa: ANN201  (a transformers tokenizer)
    """The family's tokenizer through ``AutoTokenizer`` (from ``tokenizers[layout]``, or a folder), with the
    language pair of ``LANGUAGES``."""
    import warnings

    from transformers import AutoTokenizer

    src, tgt = LANGUAGES.get(name, (None, None))
    options = {"src_lang": src, "tgt_lang": tgt} if src else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        where = tokenizers if isinstance(tokenizers, Path) else tokenizers[LAYOUTS[name]]
        return AutoTokenizer.from_pretrained(where, **options)


def folder_config(name: str, vocab_size: int, *, width: int = 16, generating: bool = False):  # noqa: ANN201  (a transformers config)
    """``family_models.reference_config`` with the tokenizer's vocabulary and ids, ``width`` its d_model."""
    config = reference_config(name)
    config.vocab_size = vocab_size
    if generating:  # generate()'s cache is sized by the encoder's layer count in transformers 5's T5: keep them equal
        for key in ("num_decoder_layers", "decoder_layers"):
            if hasattr(config, key):
                setattr(config, key, 2)
    if name.startswith("t5"):
        config.d_model, config.d_ff, config.d_kv, config.num_heads = width, 2 * width, width // 4, 4
    else:
        config.d_model, config.encoder_ffn_dim, config.decoder_ffn_dim = width, 2 * width, 2 * width
        config.max_position_embeddings = 64
    return config


def generation_config(name: str, model, tok, **settings):  # noqa: ANN001, ANN201
    """What the family's folders ask of ``generate`` (BART: ``<s>`` forced first and ``</s>`` at the bound;
    mBART-50: ``</s>`` at the bound; the target language's code is the caller's ``forced_bos_token_id``)."""
    from transformers import GenerationConfig

    c = model.config
    rules = {"bart": {"forced_bos_token_id": 0, "forced_eos_token_id": 2},
             "mbart": {"forced_eos_token_id": 2}}.get(name, {})
    base = {"decoder_start_token_id": c.decoder_start_token_id, "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id, "bos_token_id": getattr(c, "bos_token_id", None), "max_length": 40,
            "num_beams": 1}
    return GenerationConfig(**{**base, **rules, **settings})


def build(name: str, tok, seed: int, width: int, generating: bool = False):  # noqa: ANN001, ANN201  (a transformers model)
    from transformers import AutoModelForSeq2SeqLM

    vocab = len(tok) + (T5_EXTRA_ROWS if name.startswith("t5") else 0)
    config = folder_config(name, vocab, width=width, generating=generating)
    config.pad_token_id, config.eos_token_id = tok.pad_token_id, tok.eos_token_id
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForSeq2SeqLM.from_config(config)
    if name == "t5-v1.1":  # its own lm_head, as a Flan-T5 file holds it
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    return model


def save(folder: Path, name: str, model, tok, *, weights: str = "safetensors", **settings) -> Path:  # noqa: ANN001
    """``save_pretrained`` of the model (``weights``: "safetensors" or "bin"), its tokenizer and generation config."""
    model.generation_config = generation_config(name, model, tok, **settings)
    model.save_pretrained(folder)
    if weights == "bin":  # transformers 5 writes safetensors only: the .bin of older folders, every tied name in it
        (folder / "model.safetensors").unlink()
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    tok.save_pretrained(folder)
    return folder


def random_folder(name: str, tokenizers: dict[str, Path], root: Path, *, weights: str = "safetensors",
                  dtype: torch.dtype = torch.float64, **settings):  # noqa: ANN201
    """(folder, reference model in float64, eval): every weight random, saved in ``dtype``."""
    tok = tokenizer(name, tokenizers)
    model = build(name, tok, seed=0, width=16)
    randomize(model, seed=3)
    model = model.to(dtype).eval()
    folder = save(root / f"{name}-random-{weights}-{str(dtype)[6:]}", name, model, tok, weights=weights, **settings)
    return folder, model.double()


def texts(n: int, seed: int, low: int = 1, high: int = 3) -> list[str]:
    """``n`` short texts of ``WORDS`` (``low`` to ``high`` words)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high))) for _ in range(n)]


def _rows(tok, sentences: list[str]) -> tuple[list[list[int]], list[list[int]]]:  # noqa: ANN001
    encoded = tok(sentences, text_target=sentences)
    return encoded["input_ids"], encoded["labels"]


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([row + [value] * (width - len(row)) for row in rows])


def trained_folder(name: str, tokenizers: dict[str, Path], root: Path, *, steps: int = 300, batch: int = 32,
                   **settings) -> Path:
    """A folder whose model learnt, for ``steps`` Adam steps, to copy texts of one to three words."""
    tok = tokenizer(name, tokenizers)
    model = build(name, tok, seed=1, width=32, generating=True).train()
    start, pad = model.config.decoder_start_token_id, tok.pad_token_id
    corpus = texts(2000, seed=5, high=2)
    optimiser = torch.optim.Adam(model.parameters(), lr=5e-3)
    generator = random.Random(7)
    for _ in range(steps):
        sources, labels = _rows(tok, generator.sample(corpus, batch))
        src, target = _pad(sources, pad), _pad(labels, pad)
        decoder_input = torch.cat([torch.full((batch, 1), start), target[:, :-1]], dim=1)  # (B, T)
        logits = model(input_ids=src, attention_mask=(src != pad).long(), decoder_input_ids=decoder_input).logits
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), target.masked_fill(target == pad, -100))
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return save(root / f"{name}-trained", name, model.eval(), tok, **settings)


def generated(folder: Path, name: str, sentences: list[str], **options) -> tuple[list[str], list[list[int]]]:
    """``transformers``' ``generate`` on the CPU from ``folder`` (the folder's generation config, the target
    language's code forced for a multilingual model, ``do_sample=False``): (texts, ids after the decoder start
    with ``</s>`` and padding cut)."""
    texts_, ids, _ = generated_with_scores(folder, name, sentences, **options)
    return texts_, ids


def generated_with_scores(folder: Path, name: str, sentences: list[str],
                          **options) -> tuple[list[str], list[list[int]], list[float] | None]:
    """``generated``, and beam search's ``sequences_scores`` (the best hypothesis' score; None for greedy)."""
    import warnings

    from transformers import AutoModelForSeq2SeqLM

    tok = tokenizer(name, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    if name in LANGUAGES:
        options["forced_bos_token_id"] = tok.convert_tokens_to_ids(LANGUAGES[name][1])
    encoded = tok(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        output = model.generate(**encoded, do_sample=False, return_dict_in_generate=True, output_scores=True,
                                **options)
    out, scores = output.sequences, getattr(output, "sequences_scores", None)
    ids = [row[:row.index(tok.eos_token_id)] if tok.eos_token_id in row else row for row in out[:, 1:].tolist()]
    return tok.batch_decode(out, skip_special_tokens=True), ids, None if scores is None else scores.tolist()
