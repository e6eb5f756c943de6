"""The Pipeline (load_pretrained / translate / trace) and the translate CLI, on a tiny random checkpoint."""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import torch

from transformer import Transformer, TransformerConfig, load_pretrained
from transformer.checkpoints.checkpoint import CheckpointError, save_checkpoint
from transformer.decoding import beam_search, greedy_decode
from transformer.pipeline import Pipeline, TruncationWarning, UnknownCharactersWarning, clean_text
from transformer.text.tokenizers import BOS_ID, EOS_ID, CharTokenizer
from transformer.translate import main as translate_main

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 -"
MAX_LEN = 16
MAX_OUTPUT = 10


def make_pipeline() -> Pipeline:
    tokenizer = CharTokenizer.from_texts([ALPHABET])
    torch.manual_seed(0)
    config = TransformerConfig(tokenizer.vocab_size, tokenizer.vocab_size, d_model=16, n_heads=2, n_layers=2,
                               d_ff=32, dropout=0.0, max_len=MAX_LEN, tying="all")
    model = Transformer(config).eval()
    with torch.no_grad():
        model.generator.bias[EOS_ID] += 2.5  # some outputs end before MAX_OUTPUT
    return Pipeline(model, tokenizer, tokenizer, meta={"task": "reverse", "max_output_len": MAX_OUTPUT})


@pytest.fixture(scope="module")
def memory_pipe() -> Pipeline:
    return make_pipeline()


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory, memory_pipe) -> Path:
    folder = tmp_path_factory.mktemp("ckpt") / "tiny"
    return save_checkpoint(folder, memory_pipe.model, memory_pipe.src_tokenizer, memory_pipe.tgt_tokenizer,
                           memory_pipe.meta)


@pytest.fixture(scope="module")
def pipe(checkpoint_dir) -> Pipeline:
    return load_pretrained(checkpoint_dir)


TEXTS = ["abc123", "seven", "x", "forty-one"]


# --- loading and the in-memory form -------------------------------------------------------


def test_loaded_checkpoint_translates_like_the_in_memory_model(pipe, memory_pipe):
    assert pipe.translate(TEXTS) == memory_pipe.translate(TEXTS)
    assert pipe.meta["task"] == "reverse" and pipe.config == memory_pipe.config
    assert pipe.max_output_len == MAX_OUTPUT
    assert not pipe.model.training
    assert "reverse" in repr(pipe)


def test_from_checkpoint_and_folder_errors(checkpoint_dir, tmp_path):
    from transformer.checkpoints.checkpoint import load_checkpoint

    assert Pipeline.from_checkpoint(load_checkpoint(checkpoint_dir)).translate("abc") == load_pretrained(
        checkpoint_dir).translate("abc")
    with pytest.raises(CheckpointError, match="no checkpoint folder"):
        load_pretrained(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="config.json"):
        load_pretrained(tmp_path)  # a folder, but not a checkpoint
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="not a checkpoint folder"):
        load_pretrained(tmp_path / "file.txt")


def test_tokenizers_must_fit_the_model(memory_pipe):
    small = CharTokenizer.from_texts(["ab"])
    with pytest.raises(ValueError, match="source tokenizer"):
        Pipeline(memory_pipe.model, small, memory_pipe.tgt_tokenizer)


# --- translate ---------------------------------------------------------------------------------


def test_translate_is_greedy_decoding_of_the_training_source_format(pipe):
    text = "abc123"
    ids = pipe.encode_source(text)
    assert ids[0].tolist() == [*pipe.src_tokenizer.encode(text), EOS_ID]  # as train.source_ids
    result = greedy_decode(pipe.model, ids, max_len=MAX_OUTPUT)
    assert pipe.translate(text) == pipe.tgt_tokenizer.decode(result.tokens[0])


def test_source_format_matches_training(pipe):
    from transformer.text.ids import source_ids  # what training's encode_split feeds the encoder

    for text in TEXTS:
        assert pipe.source_ids(text)[1] == source_ids(pipe.src_tokenizer, text)


def test_a_string_gives_a_string_and_a_list_a_list_in_order(pipe):
    one = [pipe.translate(t) for t in TEXTS]
    assert all(isinstance(t, str) for t in one)
    assert pipe.translate(TEXTS) == one  # batching (with padding) changes nothing
    assert pipe.translate(tuple(TEXTS)) == one


def test_beam_and_sampling_options(pipe):
    assert pipe.translate(TEXTS, beam_size=1, early_stopping=True) == pipe.translate(TEXTS)
    src = pipe.encode_source(TEXTS)
    best = [pipe.tgt_tokenizer.decode(r.best.tokens) for r in beam_search(pipe.model, src, beam_size=3,
                                                                          max_len=MAX_OUTPUT)]
    assert pipe.translate(TEXTS, beam_size=3) == best
    a = pipe.translate(TEXTS, temperature=1.5, top_p=0.9, seed=3)
    assert pipe.translate(TEXTS, temperature=1.5, top_p=0.9, seed=3) == a
    assert pipe.translate(TEXTS, top_k=1, seed=5) == pipe.translate(TEXTS)
    assert len(pipe.translate("abc", max_len=2)) <= 2


@pytest.mark.parametrize("options, message", [
    ({"beam_size": 2, "temperature": 0.5}, "not both"),
    ({"seed": 1}, "seed only applies to sampling"),
    ({"temperature": 0.0}, "temperature"),
    ({"top_p": 2.0}, "top_p"),
    ({"top_k": 0}, "top_k"),
    ({"beam_size": 0}, "beam_size"),
    ({"max_len": MAX_LEN + 1}, "max_len"),
])
def test_bad_options_raise_value_error(pipe, options, message):
    with pytest.raises(ValueError, match=message):
        pipe.translate("abc", **options)


@pytest.mark.parametrize("text", ["", "   ", "\n\t", "\x00\x1b"])
def test_empty_text_raises_a_clear_value_error(pipe, text):
    with pytest.raises(ValueError, match="nothing to translate"):
        pipe.translate(text)
    with pytest.raises(ValueError, match="text 1 of 2: nothing to translate"):
        pipe.translate(["abc", text])


def test_bad_input_types(pipe):
    with pytest.raises(ValueError, match="non-empty list"):
        pipe.translate([])
    with pytest.raises(TypeError, match="not a string"):
        pipe.translate(["abc", 3])


def test_control_characters_are_stripped(pipe):
    assert clean_text("  ab\x00c\x1b\n") == "abc"
    assert clean_text("a\tb\r\nc") == "a b  c"
    assert pipe.translate("ab\x00c\n") == pipe.translate("abc")
    assert pipe.source_ids("\x07abc\x7f")[0] == "abc"


def test_unknown_characters_warn_and_become_unk(pipe):
    with pytest.warns(UnknownCharactersWarning, match="'É', '€'"):
        cleaned, ids, unknown, _ = pipe.source_ids("aÉb€É")
    assert unknown == ["É", "€"]
    assert ids == [pipe.src_tokenizer.encode("a")[0], 1, pipe.src_tokenizer.encode("b")[0], 1, 1, EOS_ID]
    with pytest.warns(UnknownCharactersWarning):
        assert isinstance(pipe.translate("aÉb"), str)


def test_long_text_is_truncated_with_a_warning(pipe):
    text = "abcdefghij" * 3  # 30 characters, max_len 16
    with pytest.warns(TruncationWarning, match="max_len"):
        ids = pipe.encode_source(text)
    assert ids.shape == (1, MAX_LEN) and ids[0, -1] == EOS_ID
    assert ids[0, :-1].tolist() == pipe.src_tokenizer.encode(text[: MAX_LEN - 1])
    with pytest.warns(TruncationWarning):
        assert pipe.translate(text) == pipe.translate(text[: MAX_LEN - 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pipe.translate(text[: MAX_LEN - 1])  # exactly fits: no warning


def test_concurrent_callers_get_the_sequential_answers(pipe):
    expected = {t: pipe.translate(t) for t in TEXTS}
    expected_beam = pipe.translate(TEXTS, beam_size=2)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            for _ in range(3):
                text = TEXTS[i % len(TEXTS)]
                assert pipe.translate(text) == expected[text]
                assert pipe.translate(TEXTS, beam_size=2) == expected_beam
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors


# --- trace ---------------------------------------------------------------------------------


def test_trace_holds_what_the_app_draws(pipe):
    result = pipe.trace("abc1")
    c = pipe.config
    assert result.src_text == "abc1"
    assert result.src_ids == [*pipe.src_tokenizer.encode("abc1"), EOS_ID]
    assert result.src_pieces == ["a", "b", "c", "1", "</s>"]
    assert result.output_text == pipe.translate("abc1")
    assert result.output_ids == result.steps.tokens[0]
    assert result.output_pieces == [pipe.tgt_tokenizer.id_to_piece(i) for i in result.output_ids]
    assert result.decoder_ids == [BOS_ID, *result.output_ids]
    trace = result.trace
    assert trace["src.ids"].tolist() == [result.src_ids]
    assert trace["tgt.ids"].tolist() == [result.decoder_ids]
    t, s = len(result.decoder_ids), len(result.src_ids)
    assert trace.attention("cross", c.n_decoder_layers - 1).shape == (1, c.n_heads, t, s)
    assert trace.attention("decoder", 0).shape == (1, c.n_heads, t, t)
    # the teacher-forced forward predicts what greedy decoding chose
    predicted = trace["logits"][0].argmax(-1).tolist()
    assert predicted[: len(result.output_ids)] == result.output_ids
    if result.finished:
        assert predicted[-1] == EOS_ID
    steps = result.steps.steps
    assert len(steps) == len(result.output_ids) + int(result.finished)
    assert steps[0].cross_attention[0].shape == (c.n_decoder_layers, c.n_heads, s)
    # each step's cross-attention is the traced forward's row for that position
    last_layer = trace.attention("cross", c.n_decoder_layers - 1)[0]  # (H, T, S)
    for i, step in enumerate(steps[:t]):
        torch.testing.assert_close(step.cross_attention[0, -1], last_layer[:, i], atol=1e-5, rtol=1e-4)


def test_trace_with_sampling_and_bad_input(pipe):
    a, b = pipe.trace("abc", temperature=2.0, seed=4), pipe.trace("abc", temperature=2.0, seed=4)
    assert a.output_ids == b.output_ids
    with pytest.raises(ValueError, match="nothing to translate"):
        pipe.trace(" \n")
    with pytest.raises(TypeError):
        pipe.trace(["abc"])


# --- the command line -----------------------------------------------------------------------------


def test_cli_prints_one_translation_per_line(checkpoint_dir, pipe, capsys):
    assert translate_main(["--model", str(checkpoint_dir), "abc", "seven"]) == 0
    assert capsys.readouterr().out.splitlines() == pipe.translate(["abc", "seven"])
    assert translate_main(["--model", str(checkpoint_dir), "abc", "--beam-size", "2"]) == 0
    assert capsys.readouterr().out.splitlines() == [pipe.translate("abc", beam_size=2)]
    assert translate_main(["--model", str(checkpoint_dir), "abc", "--temperature", "0.7", "--top-k", "3",
                           "--seed", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == [pipe.translate("abc", temperature=0.7, top_k=3, seed=1)]


def test_cli_shows_warnings_on_stderr(checkpoint_dir, capsys):
    assert translate_main(["--model", str(checkpoint_dir), "aÉ"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 1
    assert "warning:" in captured.err and "'É'" in captured.err


@pytest.mark.parametrize("args", [
    [],  # no --model, no text
    ["--model", "DIR"],  # no text
    ["--model", "DIR", "abc", "--beam-size", "two"],
    ["--model", "DIR", "abc", "--beam-size", "2", "--temperature", "0.5"],
    ["--model", "DIR", "abc", "--seed", "1"],
    ["--model", "DIR", "abc", "--bogus"],
])
def test_cli_bad_arguments_exit_2(checkpoint_dir, args, capsys):
    args = [str(checkpoint_dir) if a == "DIR" else a for a in args]
    with pytest.raises(SystemExit) as exit_info:
        translate_main(args)
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--model", "MISSING", "abc"], "no checkpoint folder"),
    (["--model", "EMPTY", "abc"], "config.json"),
    (["--model", "DIR", "   "], "nothing to translate"),
    (["--model", "DIR", "abc", "--temperature", "-1"], "temperature"),
    (["--model", "DIR", "abc", "--max-len", "999"], "max_len"),
])
def test_cli_bad_model_or_input_exits_2_with_a_message(checkpoint_dir, tmp_path, args, message, capsys):
    paths = {"DIR": str(checkpoint_dir), "MISSING": str(tmp_path / "missing"), "EMPTY": str(tmp_path)}
    assert translate_main([paths.get(a, a) for a in args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and message in captured.err


def test_cli_as_a_process_exits_2_without_a_traceback(tmp_path):
    process = subprocess.run([sys.executable, "-m", "transformer.translate", "--model", str(tmp_path), "abc"],
                             capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert process.returncode == 2
    assert "Traceback" not in process.stderr and "config.json" in process.stderr


def test_inputs_outside_the_training_domain_are_named() -> None:
    """The shipped models' wrong answers of issue 12 come with a warning; inputs inside the domain get none."""
    import warnings

    from transformer.pipeline import PRETRAINED_DIR, OutOfDomainWarning, load_pretrained

    cases = {
        "dates-de": {"2100-01-01": "the year 2100", "2024-13-45": "not a real date", "2026-11-21": None},
        "numbers-en-de": {"one million": "1,000,000 is larger", "forty seven": "'forty-seven'", "seven": None},
        "reverse": {"a" * 30: "30 characters", "abc!": "'!'", "abc12": None},
        "sentences-en-de": {"the unicorn sleeps": "found 'unicorn'", "the dog sleeps": None,
                            # more clauses than any training sentence (three at most)
                            "because the dog sleeps, the man knows that the cat thinks that the bird sings":
                                "at most 3",
                            "because the dog sleeps, the man knows that the cat plays": None,
                            # three clauses, but 49 tokens with </s>: longer than every training source (47)
                            "because a good rich painter fetches the books through the wild keys, my cold heavy pears "
                            "open the friendly coats except my slow funny cup although the poor yellow stone bites the "
                            "bicycles after no old warm woman": "the longest source the model was trained on had 47",
                            "the dog sleeps because the man sees the cat": None},
    }
    for name, texts in cases.items():
        pipe = load_pretrained(PRETRAINED_DIR / name)
        for text, expected in texts.items():
            problems = pipe.domain_warnings(text)
            if expected is None:
                assert problems == [], (name, text, problems)
            else:
                assert len(problems) == 1 and expected in problems[0], (name, text, problems)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                pipe.translate(text)
            assert sum(issubclass(w.category, OutOfDomainWarning) for w in caught) == (expected is not None)
    from transformer.text.domains import domain_warnings, english_number

    assert english_number("nine hundred and ninety-nine thousand nine hundred and ninety-nine") == 999_999
    assert english_number("two hundred one") == 201 and english_number("zwei") is None
    assert domain_warnings("custom", "anything at all") == []  # a user's own pairs: no domain known
    assert domain_warnings("numbers", "4711", src_lang="digits") == []
    assert "larger" in domain_warnings("numbers", "10000", src_lang="digits", options={"max_number": 9999})[0]


def test_a_source_longer_than_every_training_source_is_warned_of(tiny_checkpoint) -> None:
    """Any model whose run saved ``longest_source`` (tokens + EOS) warns past it, a user's own data too;
    a grammar's own complaint comes alone (it says more)."""
    from transformer.checkpoints.checkpoint import load_checkpoint
    from transformer.pipeline import Pipeline

    loaded = load_checkpoint(tiny_checkpoint)
    plain = Pipeline(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer, meta={"task": "custom"})
    length = len(plain.source_ids("abcdef", warn=False)[1])
    assert plain.domain_warnings("abcdef") == []  # nothing saved: nothing said
    for longest, warned in ((length, False), (length - 1, True)):
        pipe = Pipeline(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer,
                        meta={"task": "custom", "longest_source": longest})
        problems = pipe.domain_warnings("abcdef")
        assert bool(problems) == warned, (longest, problems)
        if warned:
            assert f"{length} tokens long" in problems[0] and f"had {longest}" in problems[0]
    strict = Pipeline(loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer,
                      meta={"task": "reverse", "longest_source": 2})
    assert len(problems := strict.domain_warnings("abc!")) == 1 and "'!'" in problems[0]


# --- every output bounded (issue 33: an uploaded checkpoint decoded for minutes) ---------------------------


def never_ending_pipeline(max_len: int, meta: dict) -> Pipeline:
    """Our format, a generator that never says </s>, a positional table of ``max_len`` positions."""
    tokenizer = CharTokenizer.from_texts([ALPHABET])
    torch.manual_seed(0)
    config = TransformerConfig(tokenizer.vocab_size, tokenizer.vocab_size, d_model=8, n_heads=2, n_layers=1,
                               d_ff=16, dropout=0.0, max_len=max_len, tying="all")
    model = Transformer(config).eval()
    with torch.no_grad():
        model.generator.bias[EOS_ID] = -1e9
    return Pipeline(model, tokenizer, tokenizer, meta=meta)


def test_a_checkpoint_without_a_trained_bound_is_bounded_by_its_source_and_a_hard_cap():
    from transformer.output_bounds import LENGTH_EXTRA, LENGTH_FACTOR, MAX_OUTPUT_TOKENS

    pipe = never_ending_pipeline(4096, {"task": "reverse"})  # no max_output_len saved
    src_len = len("abc") + 1
    assert len(pipe.trace("abc", warn=False).output_ids) == LENGTH_FACTOR * src_len + LENGTH_EXTRA == 22
    assert len(pipe.src_tokenizer.encode(pipe.translate("abc"))) == 22
    assert pipe.max_output_len == MAX_OUTPUT_TOKENS == 512  # whatever max_len (4096) allows
    claims = never_ending_pipeline(4096, {"task": "reverse", "max_output_len": 10**6})  # an uploaded meta's claim
    assert claims.output_limit(src_len) == 512 and pipe.output_limit(1000) == 512


def test_a_time_budget_cuts_decoding_with_a_warning():
    from transformer.pipeline import DecodingTimeoutWarning

    pipe = never_ending_pipeline(64, {"task": "reverse"})
    with pytest.warns(DecodingTimeoutWarning, match="time budget of 1e-09 s"):
        text = pipe.translate("abc", time_budget=1e-9)
    assert len(text) == 1
    with pytest.warns(DecodingTimeoutWarning):
        pipe.translate("abc", time_budget=1e-9, beam_size=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = pipe.trace("abc", time_budget=1e-9, warn=False)
    assert result.timed_out and not result.finished and len(result.output_ids) == 1
    assert not pipe.trace("abc", warn=False).timed_out
