"""The Patching page on decoder-only models (issue 41 item 7): a prompt pair with two names swapped (Wang et al.
2022's indirect-object identification), the logit difference of the two swapped tokens at the last position, every
layer output and head patched at every prompt position (``lm_activation_patching``). Checked: the twin the page
starts from, the metric's tokens and both runs' logit differences against the model's own logits, the exact cases
(the last layer at the last position restores everything, positions before the swap nothing), a pair of unequal
token counts refused with its counts."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from app_helpers import assert_clean, chart_figure, open_page

from transformer import load_pretrained
from ui.compute import patching
from ui.state import settings

MODELS = ("gpt2", "qwen3", "mistral", "gemma2")
# names of as many tokens in every test tokenizer (their vocabularies are tiny: " Mary" is 4 pieces, " John" 5)
CLEAN = "When Mary and Tom went to the store, Tom gave a drink to"
CORRUPT = "When Tom and Mary went to the store, Mary gave a drink to"


def test_the_twin_swaps_the_names_and_the_metric_reads_the_swapped_tokens(lm_models_dir: Path) -> None:
    assert patching.swap_names(patching.IOI_PAIR[0]) == patching.IOI_PAIR[1]
    assert patching.swap_names(CLEAN) == CORRUPT
    assert patching.swap_names("Alice met Bob. Then Alice left.") == "Bob met Alice. Then Bob left."
    assert patching.swap_names("When Mary went home") is None  # one name: nothing to swap
    pipe = load_pretrained(lm_models_dir / "qwen3")
    clean, corrupt, answer, wrong = patching.lm_pair(pipe, CLEAN, CORRUPT)
    first = next(i for i, (a, b) in enumerate(zip(clean, corrupt, strict=True)) if a != b)
    assert (answer, wrong) == (clean[first], corrupt[first]) and answer != wrong
    with pytest.raises(ValueError, match=r"has \d+ tokens, the clean one \d+"):  # " John" is one piece longer
        patching.lm_pair(pipe, *patching.IOI_PAIR)
    with pytest.raises(ValueError, match="same tokens"):
        patching.lm_pair(pipe, CLEAN, CLEAN)


@pytest.mark.parametrize("name", MODELS)
def test_patching_a_prompt_pair(lm_app_models_dir: Path, name: str) -> None:
    at = open_page("7_patching", CLEAN, name)
    assert_clean(at)
    assert at.text_input(key="patch_corrupt").value == CORRUPT  # the names swapped
    assert not at.get("plotly_chart")  # nothing runs before the button
    at.button(key="patch_run").click().run()
    assert_clean(at)
    pipe = load_pretrained(lm_app_models_dir / name)
    clean_ids, corrupt_ids, answer, wrong = patching.lm_pair(pipe, CLEAN, CORRUPT)
    with torch.inference_mode():
        logits = pipe.lm_logits(torch.tensor([clean_ids, corrupt_ids]))[:, -1].double()  # (2, V)
    differences = logits[:, answer] - logits[:, wrong]
    said = next(m.value for m in at.markdown if m.value.startswith("Logit difference"))
    shown = [float(x) for x in re.findall(r"\*\*(-?\d+\.\d+)\*\*", said)]
    # float32 logits, here of one batch of two and on the page of a larger batch: a few float32 ulps of the largest
    # logit apart (far below the 3 decimals shown, which round by 5e-4)
    np.testing.assert_allclose(shown, differences.numpy(), atol=5e-4 + 1e-5, rtol=0)
    z = np.asarray(chart_figure(at, "patch_decoder").data[0].z, dtype=float)  # (layers, positions)
    assert z.shape == (pipe.config.n_decoder_layers, len(clean_ids))
    first = next(i for i, (a, b) in enumerate(zip(clean_ids, corrupt_ids, strict=True)) if a != b)
    # each effect is a ratio of float32 logit differences: 8 ulps of the largest logit over the difference it divides by
    tolerance = 8 * 2**-24 * float(logits.abs().max()) / abs(float(differences[0] - differences[1]))
    assert abs(z[-1, -1] - 1) <= tolerance  # the last layer at the last position is the clean run's
    np.testing.assert_allclose(z[:, :first], 0, atol=tolerance)  # before the swap the two runs are equal
    heads = np.asarray(chart_figure(at, "patch_layer_heads").data[0].z, dtype=float)
    assert heads.shape == (pipe.config.n_heads, len(clean_ids))


def test_a_pair_of_unequal_token_counts_is_refused_and_the_example_is_offered(lm_app_models_dir: Path) -> None:
    at = open_page("7_patching", CLEAN, "gpt2")
    at.button(key="patch_use_ioi").click().run()
    assert_clean(at)
    assert at.session_state[settings.TEXT] == patching.IOI_PAIR[0]
    assert at.text_input(key="patch_corrupt").value == patching.IOI_PAIR[1]
    assert any("patching pairs positions one to one" in w.value for w in at.warning)
    assert not [b for b in at.button if b.key == "patch_run"]


def test_the_predicted_tokens_as_the_metric(lm_app_models_dir: Path) -> None:
    at = open_page("7_patching", CLEAN, "qwen3", patch_lm_metric="predicted")
    at.button(key="patch_run").click().run()
    assert_clean(at)
    pipe = load_pretrained(lm_app_models_dir / "qwen3")
    clean_ids, _, _, _ = patching.lm_pair(pipe, CLEAN, CORRUPT)
    with torch.inference_mode():
        top = int(pipe.lm_logits(torch.tensor([clean_ids]))[0, -1].argmax())
    said = next(m.value for m in at.markdown if m.value.startswith("Logit difference"))
    assert said.startswith(f"Logit difference `{pipe.tokenizer.display_pieces([top])[0]}`")


def test_with_chat_on_the_pair_goes_through_the_template_and_the_effects_name_positions(
        lm_app_models_dir: Path) -> None:
    """The sidebar's chat switch puts the prompt through the chat template: the patched pair is the templated one
    (the same ids the page's tokens label), and the largest effects are worded for one stack ("layer 2 output at
    position 5"), not as an encoder-decoder's "decoder layer ... decoder position"."""
    pipe = load_pretrained(lm_app_models_dir / "qwen3")
    clean_ids, corrupt_ids, _, _ = patching.lm_pair(pipe, CLEAN, CORRUPT, chat=True)
    assert clean_ids == pipe.prompt_ids(CLEAN, chat=True) != pipe.prompt_ids(CLEAN)
    assert corrupt_ids == pipe.prompt_ids(CORRUPT, chat=True)
    at = open_page("7_patching", CLEAN, "qwen3")
    at.sidebar.toggle(key=settings.CHAT_WIDGET).set_value(True).run()
    at.button(key="patch_run").click().run()
    assert_clean(at)
    z = np.asarray(chart_figure(at, "patch_decoder").data[0].z, dtype=float)  # (layers, positions)
    assert z.shape == (pipe.config.n_decoder_layers, len(clean_ids))  # the template's positions, all patched
    said = next(m.value for m in at.markdown if m.value.startswith("**The largest effects:**"))
    assert re.search(r"layer \d+ (output|head \d+) at position \d+", said)
    assert "decoder" not in said
