"""Hostile tokenizer.json files (issue 43): the file's padding and truncation never reach an encode, and a file far
larger than its model is refused before it is parsed, within 1 s and 100 MB.

Each case is a tiny tokenizer folder of ``family_helpers`` made hostile here. A case whose old failure was a stall,
a bloat or an abort runs in a child process, under a limit on its address space (``RLIMIT_AS``: 1 GiB past what
its imports took), that reports its time and its peak memory (``VmHWM``) past its imports.
"""

from __future__ import annotations

import itertools
import json
import shutil
import string
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from family_helpers import SENTENCES, tokenizer_document

from transformer.hub import memory
from transformer.hub.fast_tokenizer import MAX_LANGUAGE_CODES, FastTokenizer, load_fast_tokenizer
from transformer.hub.tokenizer_json import MAX_PIECE_CHARS, entry_caps, rust_errors

ROOT = Path(__file__).resolve().parents[1]
SECONDS, MEGABYTES = 1.0, 100  # the bound on a hostile file: refused or loaded within these
T5_START, START = 0, 2  # config.json's decoder_start_token_id (T5: the pad id; the others: </s>)

CHILD = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
def kb(field):
    return next(int(l.split()[1]) for l in Path('/proc/self/status').read_text().splitlines() if l.startswith(field))
import tokenizers, transformer.hub.fast_tokenizer
from transformer.hub.fast_tokenizer import load_fast_tokenizer
limit = kb('VmSize') * 1024 + 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
base, start, found = kb('VmHWM'), time.perf_counter(), {{}}
try:
    tokenizer = load_fast_tokenizer({folder!r}, {layout!r}, decoder_start_id={start}, vocab_size={vocab_size})
    found['ids'] = len(tokenizer.encode({text!r}))
except ValueError as error:
    found['error'] = str(error)
found.update(seconds=time.perf_counter() - start, megabytes=(kb('VmHWM') - base) / 1024)
print(json.dumps(found))
"""


def run_child(folder: Path, layout: str, vocab_size: int, text: str = "the house is small") -> dict:
    """What loading ``folder`` and encoding ``text`` did in a child process: {"ids": n} or {"error": message}, with
    its seconds and peak megabytes past its imports; fails the test when the child died (an abort, a crash)."""
    child = CHILD.format(root=str(ROOT), folder=str(folder), layout=layout, vocab_size=vocab_size, text=text,
                         start=T5_START if layout == "t5" else START)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the child died ({done.returncode}): {done.stderr[-600:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_bounded(found: dict) -> None:
    assert found["seconds"] < SECONDS and found["megabytes"] < MEGABYTES, found


def hostile(base: Path, root: Path, change, *, raw: bytes | None = None) -> Path:  # noqa: ANN001
    """A copy of the tokenizer folder ``base`` in ``root`` whose tokenizer.json is ``change(document)``'s result
    (or the bytes ``raw``)."""
    folder = root / "hostile"
    shutil.copytree(base, folder)
    data = raw if raw is not None else json.dumps(change(tokenizer_document(base))).encode()
    (folder / "tokenizer.json").write_bytes(data)
    return folder


def own_size(folder: Path, layout: str) -> int:
    return load_fast_tokenizer(folder, layout, decoder_start_id=T5_START if layout == "t5" else START).vocab_size


def with_entries(document: dict, field: str, entries: bytes) -> bytes:
    """``document`` as JSON bytes with ``entries`` (JSON array items) appended to ``field``: "vocab" (a Unigram
    list), "merges" or "added_tokens"; written as bytes, since a million entries take seconds through json.dumps."""
    marker = "__ENTRIES__"
    target = document if field == "added_tokens" else document["model"]
    target[field] = [*target[field], marker]
    text = json.dumps(document).encode()
    return text.replace(f'"{marker}"'.encode(), entries)


# --- item 1: the file's padding and truncation are not obeyed ------------------------------------------------------


@pytest.mark.parametrize("padding", [{"strategy": {"Fixed": 10**8}, "pad_to_multiple_of": None},
                                     {"strategy": "BatchLongest", "pad_to_multiple_of": 10**8}])
def test_the_files_padding_is_not_obeyed(family_tokenizers, tmp_path, padding):
    """It padded the first encode to 10^8 ids: the process aborted ("memory allocation failed") at 4.7 GB."""
    base = family_tokenizers["bart"]
    folder = hostile(base, tmp_path, lambda d: {**d, "padding": {
        **padding, "direction": "Right", "pad_id": 1, "pad_type_id": 0, "pad_token": "<pad>"}})
    expected = len(load_fast_tokenizer(base, "bart", decoder_start_id=START).encode("the house is small"))
    found = run_child(folder, "bart", own_size(base, "bart"))
    assert found.get("ids") == expected, found
    assert_bounded(found)


def test_a_truncation_stride_past_its_length_never_reaches_rust(family_tokenizers, tmp_path):
    """Encoding a text longer than max_length panicked in Rust (PanicException, a BaseException): the page went
    blank. The file's truncation is dropped: every text gives the ids it gives without one."""
    base = family_tokenizers["bart"]
    folder = hostile(base, tmp_path, lambda d: {**d, "truncation": {
        "direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 10}})
    ours, plain = (load_fast_tokenizer(f, "bart", decoder_start_id=START) for f in (folder, base))
    for text in SENTENCES:
        assert ours.encode(text) == plain.encode(text), text
    assert len(ours.encode(SENTENCES[17])) > 4


def test_a_rust_panic_is_a_value_error(family_tokenizers):
    from tokenizers import Tokenizer

    document = {**tokenizer_document(family_tokenizers["bart"]),
                "truncation": {"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 10}}
    raw = Tokenizer.from_str(json.dumps(document))  # the library itself, as the old code built it
    with pytest.raises(ValueError, match="the tokenizers library failed .*stride"):
        with rust_errors("encoding"):
            raw.encode("the house is small and the dog is big")
    with pytest.raises(KeyboardInterrupt), rust_errors("anything"):  # other BaseExceptions pass
        raise KeyboardInterrupt


# --- item 3: entries in proportion to the model, counted before parsing -----------------------------------------


def test_a_million_unigram_pieces_for_a_small_model_are_refused_unparsed(family_tokenizers, tmp_path):
    """3.9 M pieces (61 MB) stalled every thread 9.3 s and kept 3.1 GB; 10^6 (19 MB) took 3.5 s and 660 MB."""
    base = family_tokenizers["t5"]
    pieces = b",".join(b'["x%d",-20.0]' % i for i in range(10**6))
    folder = hostile(base, tmp_path, None, raw=with_entries(tokenizer_document(base), "vocab", pieces))
    found = run_child(folder, "t5", own_size(base, "t5") + 3)
    assert "tokenizer.json: holds more than" in found.get("error", "") and "model.vocab" in found["error"], found
    assert_bounded(found)


def test_a_hundred_thousand_merges_for_a_small_model_are_refused_unparsed(family_tokenizers, tmp_path):
    """10^6 merges (27 MB) stalled 4.9 s and kept 1.37 GB; 3 x 10^5 with their pieces took 8 s."""
    base = family_tokenizers["bart"]
    document = tokenizer_document(base)
    n = len(document["model"]["vocab"])
    document["model"]["vocab"].update({f"a{i}": n + i for i in range(10**5)})
    document["model"]["vocab"].update({f"a{i}b": n + 10**5 + i for i in range(10**5)})
    merges = b",".join(b'["a%d","b"]' % i for i in range(10**5))
    folder = hostile(base, tmp_path, None, raw=with_entries(document, "merges", merges))
    found = run_child(folder, "bart", own_size(base, "bart"))
    assert "tokenizer.json: holds more than" in found.get("error", "") and "model.merges" in found["error"], found
    assert_bounded(found)


def codes(n: int) -> list[str]:
    """``n`` strings of mBART-50's language-code form, xx_YY."""
    letters = itertools.product(string.ascii_lowercase, string.ascii_lowercase, string.ascii_uppercase,
                                string.ascii_uppercase)
    return [f"{a}{b}_{c}{d}" for a, b, c, d in itertools.islice(letters, n)]


def added_tokens(first_id: int, contents: list[str]) -> list[dict]:
    return [{"id": first_id + i, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for i, content in enumerate(contents)]


def test_two_hundred_thousand_added_tokens_for_a_small_model_are_refused_unparsed(family_tokenizers, tmp_path):
    """5 x 10^5 added tokens stalled 3.9 s and gave each language menu 500 k entries."""
    base = family_tokenizers["mbart50"]
    document = tokenizer_document(base)
    first = max(token["id"] for token in document["added_tokens"]) + 1
    tokens = b",".join(json.dumps(token).encode() for token in added_tokens(first, codes(2 * 10**5)))
    folder = hostile(base, tmp_path, None, raw=with_entries(document, "added_tokens", tokens))
    found = run_child(folder, "mbart50", own_size(base, "mbart50"))
    assert "tokenizer.json: holds more than" in found.get("error", "") and "added_tokens" in found["error"], found
    assert_bounded(found)


@pytest.mark.parametrize("field", ["model.vocab", "model.merges", "added_tokens"])
def test_each_field_past_its_cap_is_named(family_tokenizers, tmp_path, field):
    """Just over a field's cap the file is parsed (the count of its strings passes) and the field is named."""
    layout = "t5" if field == "model.vocab" else "bart" if field == "model.merges" else "mbart50"
    base = family_tokenizers[layout]
    size = own_size(base, layout)
    document = tokenizer_document(base)
    over = entry_caps(size)[field] + 1
    if field == "model.vocab":
        document["model"]["vocab"] += [[f"x{i}", -20.0] for i in range(over - len(document["model"]["vocab"]))]
    elif field == "model.merges":
        document["model"]["merges"] *= over // len(document["model"]["merges"]) + 1
    else:
        document["added_tokens"] += added_tokens(size, [f"<extra {i}>" for i in range(over)])
    folder = hostile(base, tmp_path, lambda d: document)
    with pytest.raises(ValueError, match=rf"tokenizer.json: {field} holds [\d,]+ entries; a model of {size:,} ids"):
        load_fast_tokenizer(folder, layout, decoder_start_id=T5_START if layout == "t5" else START, vocab_size=size)


def test_a_very_long_piece_is_refused(family_tokenizers, tmp_path):
    """One Unigram piece of 300 k characters (a 300 KB file): the Rust trie took 100 MB, an encode of a long text
    seconds, and freeing it crashed the process (a segmentation fault)."""
    base = family_tokenizers["t5"]
    folder = hostile(base, tmp_path, lambda d: {**d, "model": {**d["model"], "vocab": [
        *d["model"]["vocab"], ["x" * 300_000, -30.0]]}})
    found = run_child(folder, "t5", own_size(base, "t5") + 3, text="x" * 10_000)
    assert found.get("error", "").endswith(f"model.vocab holds a piece of 300,000 characters; a piece has at most "
                                           f"{MAX_PIECE_CHARS:,}"), found
    assert_bounded(found)


def test_a_language_menu_lists_at_most_its_cap(family_tokenizers):
    """Language codes are menu entries: a file with more than any model has is refused."""
    document = tokenizer_document(family_tokenizers["mbart50"])
    first = max(token["id"] for token in document["added_tokens"]) + 1
    document["added_tokens"] += added_tokens(first, codes(MAX_LANGUAGE_CODES + 1))
    vocab_size = 8 * (first + MAX_LANGUAGE_CODES + 1)  # the added tokens' cap is no bound here
    with pytest.raises(ValueError, match=f"added_tokens holds [\\d,]+ language codes; a model has at most "
                                         f"{MAX_LANGUAGE_CODES:,}"):
        FastTokenizer(document, "mbart50", decoder_start_id=START, vocab_size=vocab_size)


def test_the_memory_check_counts_the_tokenizer(family_tokenizers, tmp_path, monkeypatch):
    """Free memory for the model and its weights alone no longer passes: the tokenizer needs its share too."""
    from family_folders import random_folder

    from transformer.checkpoints.weights_header import parameter_count
    from transformer.hub.families import family_of
    from transformer.pipeline import load_pretrained

    folder, _ = random_folder("m2m100", family_tokenizers, tmp_path, dtype=torch.float32)
    config = family_of("m2m_100").config_of(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    weights_alone = parameter_count(config) * (4 + memory.READ_BYTES)  # float32, and its weights as read
    monkeypatch.setattr(memory, "available_memory", lambda: weights_alone)
    with pytest.raises(ValueError, match=r"\(the model, [\d.]+ GB, its tokenizer, [\d.]+ GB, and its weights as"):
        load_pretrained(folder)
