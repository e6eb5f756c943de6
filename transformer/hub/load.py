"""Open a Hugging Face folder of a supported family as a ``Checkpoint``: our Transformer with its weights, and its
tokenizers.

Order of work, so that a bad folder costs nothing: the folder's small files are read once, each under its cap,
into one record (``folder.read_folder``: config.json, tokenizer_config.json, generation_config.json, the weight
files listed), the ``model_type`` picks the family (``families.family_of``: decoder-only, encoder-only and other
encoder-decoder types are refused by name), which maps the record: config.json becomes a ``TransformerConfig``
(the family's ``config_of``), the size caps are checked
by arithmetic on it (``weights_header.caps_problem``: 10^9 layers are refused in microseconds), then its memory,
its tokenizer's included, against the memory free (``memory.memory_problem``), the files are listed (a missing one
is named), the tokenizers are read (each file's size capped before it is read, a tokenizer.json's entries counted
against the config's vocabulary before it is parsed: ``tokenizer_json``; they give the ``<unk>`` id), the weights'
shapes are checked against the config, and only then is the model built: on the meta device in the chosen dtype,
then given memory once and filled, so a 600 M-parameter model never holds a random initialisation it would throw
away.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from ..checkpoints.checkpoint import Checkpoint, CheckpointError, load_weights
from ..checkpoints.weights_files import read_tensors
from ..checkpoints.weights_header import caps_problem, parameter_count
from ..network.config import TransformerConfig
from ..network.model import Transformer
from ..text.tokenizers import Tokenizer
from .families import family_of, tokenizer_layout
from .family_config import Family
from .fast_tokenizer import load_fast_tokenizer
from .folder import CONFIG_FILE, FolderRecord, missing_files, read_folder
from .generation import generation_settings
from .lm_tokenizer import LMTokenizer, load_lm_tokenizer
from .mapping import expected_shapes, weights_of
from .memory import check_dtype, memory_problem
from .tokenizer import load_marian_tokenizers
from .tokenizer_json import tokenizer_file_bytes


def load_hf(folder: str | Path, *, device: str = "cpu", dtype: torch.dtype | None = None) -> Checkpoint:
    """The model (eval mode, in ``dtype``: float32 by default, float16 / bfloat16 keep half weights; on ``device``)
    and tokenizers of a Hugging Face folder of a supported family; ``CheckpointError`` (a ValueError) naming the
    problem otherwise."""
    folder = Path(folder)
    try:
        dtype = check_dtype(dtype)
        record = read_folder(folder)  # its small files, each read once under its cap, and its weight files listed
        if record.model_type is None or "model" in record.config:
            raise CheckpointError("no Hugging Face config.json with a model_type")
        family = family_of(record.model_type)
        layout = tokenizer_layout(family, record)  # a folder of the family with another tokenizer: refused here
        sizes = family.config_of(record.config)
        problem = caps_problem(sizes) or memory_problem(  # the caps by arithmetic, before anything is listed
            parameter_count(sizes), dtype, device, tokenizer_bytes=_tokenizer_bytes(folder, family))
        if problem:
            raise CheckpointError(problem)
        missing = missing_files(folder, family, record.weight_files)
        if missing:
            raise CheckpointError(f"a {family.model_type} folder needs {', '.join(missing)}")
        if family.kind == "decoder":  # one tokenizer.json as AutoTokenizer builds it, no more ids than the model's
            src_tokenizer = tgt_tokenizer = load_lm_tokenizer(
                folder, family.model_type, vocab_size=sizes.tgt_vocab_size,
                eos_token_id=record.config.get("eos_token_id"))
            unk = tgt_tokenizer.unk_id
            config = dataclasses.replace(sizes, pad_id=lm_pad_id(tgt_tokenizer, record.config.get("pad_token_id")),
                                         **({} if unk is None else {"unk_id": unk}))
        else:
            src_tokenizer, tgt_tokenizer = _tokenizers(record, layout, sizes)
            config = dataclasses.replace(sizes, unk_id=tgt_tokenizer.unk_id)
        for side, tokenizer, size in (("source", src_tokenizer, config.src_vocab_size),
                                      ("target", tgt_tokenizer, config.tgt_vocab_size)):
            if tokenizer.vocab_size != size:  # a file with a repeated key counts more pieces than it holds
                raise CheckpointError(f"the {side} vocabulary has {tokenizer.vocab_size} pieces but "
                                      f"{CONFIG_FILE} says {size}")
        settings = generation_settings(record.generation_config, record.config)
        tensors = weights_of(family, read_tensors(record.weight_files, expected_shapes(family, config), dtype),
                             config)
    except ValueError as error:  # CheckpointError naming the file (not yet the folder), FieldError, tokenizer files
        raise CheckpointError(f"{folder}: {error}") from None
    except RecursionError:  # a JSON file nested deeper than the parser goes, read by a reader without file_caps's
        raise CheckpointError(f"{folder}: one of its JSON files nests deeper than the parser goes") from None

    model = _build(config, tensors, dtype, where=str(folder))
    del tensors
    model.to(device).eval()
    max_length = settings.get("max_length")  # counts the decoder's start id: max_length - 1 generated tokens
    meta = {"source": "huggingface", "model_type": family.model_type, "kind": family.kind, "name": folder.name,
            "max_output_len": min(max_length - 1, config.max_len) if max_length and max_length > 1
            else config.max_len,
            "num_beams": settings.get("num_beams", 1), "generation": settings, "dtype": str(dtype)}
    if layout is not None:
        meta["tokenizer_settings"] = {key: value for key, value in tgt_tokenizer.settings.items()
                                      if key in ("src_lang", "tgt_lang") and isinstance(value, str)}
    return Checkpoint(folder, config, model, src_tokenizer, tgt_tokenizer, meta)


def load_marian(folder: str | Path, *, device: str = "cpu") -> Checkpoint:
    """``load_hf`` of a Marian folder (its old name; any family opens through it)."""
    return load_hf(folder, device=device)


def lm_pad_id(tokenizer: LMTokenizer, declared: object) -> int:
    """The pad id of a decoder-only model: one no prompt holds, so that code which reads padding as "pad id"
    (the explanations' real tokens, a batch's left padding) never takes a real token for it. Many folders name
    none, or their EOS (Qwen's and SmolLM2's instruct models: ``<|im_end|>``, which every chat prompt holds), so
    the first of these that is neither an EOS, the BOS nor in a rendered chat prompt: config.json's
    ``pad_token_id``, the tokenizer's pad token, the first embedding row past the tokenizer's ids (Qwen: 151,665
    ids, 151,936 rows), the lowest other special token; else the first EOS (GPT-2: ``<|endoftext|>``, as
    ``generate`` pads with it). The pad id chooses nothing in decoding: a batch's padding is its attention mask."""
    avoid = {*tokenizer.eos_ids, tokenizer.bos_id}
    if tokenizer.has_chat_template:
        try:
            avoid |= set(tokenizer.chat([{"role": "user", "content": "x"}], add_generation_prompt=True))
        except ValueError:  # a template that wants more (a system turn, tools): its specials are avoided below
            pass
    declared = declared if isinstance(declared, int) and not isinstance(declared, bool) else None
    for candidate in (declared, tokenizer.pad_id):
        if candidate is not None and candidate not in avoid and 0 <= candidate < tokenizer.vocab_size:
            return candidate
    if tokenizer.own_size < tokenizer.vocab_size:
        return tokenizer.own_size
    others = sorted(tokenizer.special_ids - avoid)
    return others[0] if others else (tokenizer.eos_ids or (0,))[0]


def _tokenizer_bytes(folder: Path, family: Family) -> int:
    """A bound on what the folder's tokenizer files take in memory once read (those its family reads)."""
    return tokenizer_file_bytes([folder / name for name in (*family.tokenizer_files, *family.optional_tokenizer_files)])


def _tokenizers(record: FolderRecord, layout: str | None, sizes: TransformerConfig) -> tuple[Tokenizer, Tokenizer]:
    """(source, target) tokenizers: Marian's two sides, or one tokenizer.json serving both (tokenizer_config.json
    as ``read_folder`` read it)."""
    try:
        if layout is None:
            return load_marian_tokenizers(record.path, vocab_sizes=(sizes.src_vocab_size, sizes.tgt_vocab_size),
                                          settings=record.tokenizer_config)
        tokenizer = load_fast_tokenizer(record.path, layout, decoder_start_id=sizes.bos_id,
                                        vocab_size=sizes.tgt_vocab_size, settings=record.tokenizer_config)
    except ValueError as error:
        raise CheckpointError(f"cannot load the tokenizers: {error}") from None
    if sizes.src_vocab_size != sizes.tgt_vocab_size:
        raise CheckpointError(f"one tokenizer serves both sides, but the config gives them "
                              f"{sizes.src_vocab_size} and {sizes.tgt_vocab_size} ids")
    return tokenizer, tokenizer


def _build(config: TransformerConfig, tensors: dict[str, torch.Tensor], dtype: torch.dtype, *, where: str
           ) -> Transformer:
    """The model on the meta device, cast to ``dtype`` there, given (untouched) memory and then the tensors
    themselves: each read tensor of the model's dtype becomes its parameter (``load_weights(take=True)``), so a
    float32 model's weights are held once while it is filled, not twice. ``tensors`` is emptied."""
    with torch.device("meta"):
        model = Transformer(config)
    model.to(dtype)
    model.to_empty(device="cpu")
    model.tie_weights()
    load_weights(model, tensors, where=where, take=True)
    return model


__all__ = ["Family", "load_hf", "load_marian"]
