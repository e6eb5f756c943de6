"""Greedy translations of a Marian model equal transformers' ``generate(num_beams=1, do_sample=False)``.

A tiny MarianMTModel is trained inside the test for a few hundred steps on the reverse task (so that its
outputs depend on the input and end with </s>), saved as transformers saves it, and read by
``load_pretrained``; both translate 40 unseen sentences.
"""

from __future__ import annotations

import pytest
import torch
from marian_helpers import corpus, make_marian_folder

from transformer import load_pretrained

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory):
    folder = make_marian_folder(tmp_path_factory.mktemp("marian") / "trained", d_model=32, heads=4, ffn=64,
                                randomize=False)
    tokenizer = transformers.MarianTokenizer.from_pretrained(folder)
    model = transformers.MarianMTModel.from_pretrained(folder)
    pairs = corpus(n=600, seed=1)
    generator = torch.Generator().manual_seed(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    with torch.random.fork_rng():
        torch.manual_seed(0)  # dropout masks
        for _ in range(300):
            chosen = torch.randint(len(pairs), (32,), generator=generator).tolist()
            batch = tokenizer([pairs[i][0] for i in chosen], text_target=[pairs[i][1] for i in chosen],
                              padding=True, return_tensors="pt")
            batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.eval().save_pretrained(folder)
    return folder


def test_greedy_translations_equal_generate(trained_folder):
    tokenizer = transformers.MarianTokenizer.from_pretrained(trained_folder)
    reference = transformers.MarianMTModel.from_pretrained(trained_folder).eval()
    pipe = load_pretrained(trained_folder)
    texts = [source for source, _ in corpus(n=40, seed=99)]
    inputs = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        output = reference.generate(**inputs, num_beams=1, do_sample=False, max_new_tokens=40,
                                    bad_words_ids=[[tokenizer.pad_token_id]])
    expected = tokenizer.batch_decode(output, skip_special_tokens=True)
    got = pipe.translate(texts, max_len=40)
    assert got == expected
    assert len(set(got)) > 30  # the outputs depend on the input ...
    finished = (output == tokenizer.eos_token_id).any(dim=1)
    assert finished.float().mean() > 0.9  # ... and end
    # one at a time (no padding in the batch) gives the same
    assert [pipe.translate(text, max_len=40) for text in texts[:5]] == expected[:5]
