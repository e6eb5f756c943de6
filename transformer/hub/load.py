"""Open a Hugging Face Marian folder as a ``Checkpoint``: our Transformer with its weights, and its tokenizers.

Order of work, so that a bad folder costs nothing: config.json is read (at most ``MAX_CONFIG_BYTES``) and
becomes a ``TransformerConfig`` (any other model_type is refused by name), the size caps are checked by
arithmetic on it (``weights_header.caps_problem``: 10^9 layers are refused in microseconds), the files are
listed (a missing one is named), the tokenizers are read (each file's size capped before it is read, the
vocabularies' piece counts compared with the config before they are parsed; they give the ``<unk>`` id), the
weights' shapes are checked against the config, and only then is the model built: on the meta device, then
given memory once and filled, so a 74 M-parameter model never holds a random initialisation it would throw
away.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoint import Checkpoint, CheckpointError, load_weights
from ..network.model import Transformer
from .config import MarianConfigError, generation_settings, marian_config, read_document
from .folder import missing_files, model_type, weights_files
from .tokenizer import load_marian_tokenizers
from .weights import MarianWeightsError, check_caps, read_marian_tensors, to_ours


def load_marian(folder: str | Path, *, device: str = "cpu") -> Checkpoint:
    """The model (eval mode, float32, on ``device``) and tokenizers of a Marian folder; ``CheckpointError``
    (a ValueError) naming the problem otherwise."""
    folder = Path(folder)
    kind = model_type(folder)
    if kind is None:
        raise CheckpointError(f"{folder}: no Hugging Face config.json with a model_type")
    try:
        document = read_document(folder)
        sizes = marian_config(document, unk_id=0)  # the other model types are refused by name here
        check_caps(sizes)  # by arithmetic, before any file is listed or read per layer
        missing = missing_files(folder)
        if missing:
            raise CheckpointError(f"{folder}: a Marian folder needs {', '.join(missing)}")
        try:
            src_tokenizer, tgt_tokenizer = load_marian_tokenizers(
                folder, vocab_sizes=(sizes.src_vocab_size, sizes.tgt_vocab_size))
        except ValueError as error:
            raise CheckpointError(f"{folder}: cannot load the tokenizers: {error}") from None
        config = marian_config(document, unk_id=tgt_tokenizer.unk_id)
        for side, tokenizer, size in (("source", src_tokenizer, config.src_vocab_size),
                                      ("target", tgt_tokenizer, config.tgt_vocab_size)):
            if tokenizer.vocab_size != size:  # a file with a repeated key counts more pieces than it holds
                raise CheckpointError(f"{folder}: the {side} vocabulary has {tokenizer.vocab_size} pieces but "
                                      f"config.json says {size}")
        settings = generation_settings(folder, document)
        tensors = to_ours(read_marian_tensors(weights_files(folder), config), config)
    except (MarianConfigError, MarianWeightsError) as error:
        raise CheckpointError(f"{folder}: {error}") from None

    with torch.device("meta"):
        model = Transformer(config)
    model.to_empty(device="cpu")
    model.tie_weights()
    load_weights(model, tensors, where=str(folder))
    del tensors
    model.to(device).eval()
    meta = {"source": "huggingface", "model_type": "marian", "name": folder.name,
            "max_output_len": min(settings.get("max_length", config.max_len), config.max_len),
            "num_beams": settings.get("num_beams", 1)}
    return Checkpoint(folder, config, model, src_tokenizer, tgt_tokenizer, meta)
