"""Each family from its Hugging Face folder, as a user opens it: ``transformers``' ``save_pretrained`` writes the
folder (a tiny model with random weights, norms away from 1 and 0, float64, and the family's tokenizer), and
``load_pretrained(folder, dtype=torch.float64)`` must compute what ``AutoModelForSeq2SeqLM.from_pretrained`` of
the same folder computes: logits within 1e-10 at every real position, every head's attention weights, on texts
tokenized by the pipeline (ids equal to ``AutoTokenizer``'s). A ``pytorch_model.bin`` folder reads the same; the
``<unk>`` id is the tokenizer's; half weights load, float32 by default.
"""

from __future__ import annotations

import importlib
import warnings

import pytest
import torch
from family_folders import LANGUAGES, random_folder, tokenizer
from family_helpers import SENTENCES
from family_models import NAMES

from transformer.network.masks import decoder_real
from transformer.network.trace import Trace
from transformer.pipeline import clean_text, load_pretrained
from transformer.text.ids import pad

pytest.importorskip("transformers")
TOLERANCE = 1e-10
TEXTS = [text for text in SENTENCES if text.strip()][:8]


def reference(folder, dtype=torch.float64):  # noqa: ANN001, ANN201
    from transformers import AutoModelForSeq2SeqLM

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager").eval()


def inputs(pipe, tok) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """(src (B, S), decoder input (B, T)): the pipeline's source ids of ``TEXTS`` (checked against
    ``AutoTokenizer``'s) and the tokenizer's target ids after the decoder's start id, both padded."""
    rows = [pipe.source_ids(text, warn=False)[1] for text in TEXTS]
    assert rows == tok([clean_text(text) for text in TEXTS])["input_ids"]
    targets = tok(text_target=[clean_text(text) for text in TEXTS])["input_ids"]
    c = pipe.config
    return pad(rows, "cpu", c.pad_id), pad([[c.bos_id, *row[:-1]] for row in targets], "cpu", c.pad_id)


def compare(name: str, folder, dtype=torch.float64) -> None:  # noqa: ANN001
    """Logits and every head's attention of the folder through our loader and through transformers'."""
    src_lang, tgt_lang = LANGUAGES.get(name, (None, None))
    pipe = load_pretrained(folder, dtype=dtype, src_lang=src_lang, tgt_lang=tgt_lang)
    theirs_model = reference(folder)
    src, tgt = inputs(pipe, tokenizer(name, folder))
    c = pipe.config
    with torch.no_grad():
        theirs = theirs_model(input_ids=src, attention_mask=(src != c.pad_id).long(), decoder_input_ids=tgt,
                              decoder_attention_mask=decoder_real(tgt, c.pad_id).long(), output_attentions=True)
        trace = Trace()
        ours = pipe.model(src, tgt.to(pipe.device), trace=trace)
    real = decoder_real(tgt, c.pad_id)  # (B, T)
    assert (ours[real] - theirs.logits[real]).abs().max() < TOLERANCE, name
    assert theirs.logits[real].std() > 0.05
    src_real = src != c.pad_id
    for kind, layers, real_queries in (("encoder", theirs.encoder_attentions, src_real),
                                       ("decoder", theirs.decoder_attentions, real),
                                       ("cross", theirs.cross_attentions, real)):
        for layer, weights in enumerate(layers):
            rows = real_queries[:, None, :, None].expand_as(weights)  # every head, real queries, every key
            assert (trace.attention(kind, layer) - weights)[rows].abs().max() < TOLERANCE, (name, kind, layer)


@pytest.mark.parametrize("name", NAMES)
def test_a_folder_of_each_family_computes_what_transformers_computes(name, family_tokenizers, tmp_path) -> None:
    folder, _ = random_folder(name, family_tokenizers, tmp_path)
    compare(name, folder)


def test_a_pytorch_model_bin_folder_reads_the_same(family_tokenizers, tmp_path) -> None:
    folder, _ = random_folder("mbart", family_tokenizers, tmp_path, weights="bin")
    assert (folder / "pytorch_model.bin").is_file() and not (folder / "model.safetensors").exists()
    compare("mbart", folder)


@pytest.mark.parametrize(("name", "module"), [("t5", "t5"), ("bart", "bart"), ("m2m100", "m2m_100")])
def test_the_unk_id_is_the_tokenizers(name, module, family_tokenizers, tmp_path, monkeypatch) -> None:
    """config_of's ``unk_id`` is the family's usual one; the loader replaces it with the tokenizer's."""
    folder, _ = random_folder(name, family_tokenizers, tmp_path, dtype=torch.float32)
    family_module = importlib.import_module(f"transformer.hub.families.{module}")
    monkeypatch.setattr(family_module, "UNK_ID", 11)  # a family default the tokenizer does not share
    pipe = load_pretrained(folder)
    assert pipe.config.unk_id == tokenizer(name, family_tokenizers).unk_token_id != 11


@pytest.mark.parametrize("stored", [torch.float16, torch.bfloat16])
def test_half_weights_load_in_float32_by_default_and_in_half_when_asked(stored, family_tokenizers, tmp_path) -> None:
    folder, _ = random_folder("t5-v1.1", family_tokenizers, tmp_path, dtype=stored)
    pipe = load_pretrained(folder)
    assert {p.dtype for p in pipe.model.parameters()} == {torch.float32}
    theirs = reference(folder, dtype=stored).state_dict()
    assert torch.equal(pipe.model.encoder.layers[0].self_attn.in_proj.weight[:16].to(stored),
                       theirs["encoder.block.0.layer.0.SelfAttention.q.weight"])  # the stored values, exactly
    for dtype in (torch.float16, torch.bfloat16):
        half = load_pretrained(folder, dtype=dtype)
        assert {p.dtype for p in half.model.parameters()} == {dtype}
        assert isinstance(half.translate("the house", max_new_tokens=3), str)
