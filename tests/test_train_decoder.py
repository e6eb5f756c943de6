"""A decoder-only model trained on a built-in task: the sequence layout, the loss on the target only, the run, its
checkpoint, ``load_pretrained``'s ``TaskLMPipeline`` and the comparison with the encoder-decoder."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from transformer import load_pretrained
from transformer.checkpoints.checkpoint import list_snapshots, load_checkpoint, read_log, save_checkpoint
from transformer.network.model import Transformer
from transformer.task_lm import TaskLMPipeline
from transformer.text.ids import lm_sequence, prompt_ids, split_lm_sequence
from transformer.text.tokenizers import CharTokenizer
from transformer.train import Progress, TrainConfig, main, train
from transformer.train.batching import batch_tensors, encode_split
from transformer.train.compare import compare_architectures
from transformer.train.config import model_config
from transformer.train.loss import label_smoothed_loss
from transformer.translate import main as translate_main


def tiny_config(out: Path, **changes) -> TrainConfig:
    """A copy task a two-layer decoder-only model learns in a few seconds on one busy core."""
    base = TrainConfig(task="copy", task_options={"min_len": 2, "max_len": 5}, n_train=800, n_valid=30, n_test=30,
                       tokenizer="char", architecture="decoder", d_model=64, n_heads=2, n_layers=2, d_ff=128,
                       warmup=30, lr=5e-3, batch_tokens=256, max_steps=120, max_seconds=None, eval_every=1e9,
                       log_every=10, threads=1, out=str(out))
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module")
def tokenizer() -> CharTokenizer:
    return CharTokenizer.from_texts(["abcdefgh xyz"])


def tiny_model(tok: CharTokenizer, **changes) -> Transformer:
    cfg = dataclasses.replace(TrainConfig(architecture="decoder", d_model=16, n_heads=2, n_layers=2, d_ff=32,
                                          max_len=32), **changes)
    generator = torch.Generator().manual_seed(0)
    model = Transformer(model_config(cfg, tok, tok))
    model.reset_parameters(generator)
    return model.eval()


# --- the sequence layout -------------------------------------------------------------------


def test_the_sequence_is_source_separator_target_eos_and_splits_back(tokenizer: CharTokenizer) -> None:
    ids, prompt_len = lm_sequence(tokenizer, "abc", "xyz")
    enc = tokenizer.encode
    assert ids == [*enc("abc"), tokenizer.bos_id, *enc("xyz"), tokenizer.eos_id]
    assert ids[:prompt_len] == prompt_ids(tokenizer, "abc")
    source, target = split_lm_sequence(ids, tokenizer.bos_id, tokenizer.eos_id)
    assert (tokenizer.decode(source), tokenizer.decode(target)) == ("abc", "xyz")
    assert split_lm_sequence(ids[:-1], tokenizer.bos_id, tokenizer.eos_id)[1] == enc("xyz")  # no EOS: all of it
    with pytest.raises(ValueError, match="no separator"):
        split_lm_sequence(enc("abc"), tokenizer.bos_id, tokenizer.eos_id)


def test_batch_tensors_label_the_target_and_eos_only(tokenizer: CharTokenizer) -> None:
    examples = encode_split([("abc", "xy"), ("a", "bcde")], tokenizer, tokenizer, decoder_only=True)
    _, inputs, labels = batch_tensors(examples, [0, 1], "cpu", tokenizer.pad_id)
    pad = tokenizer.pad_id
    for row, (src, tgt) in enumerate([("abc", "xy"), ("a", "bcde")]):
        sequence, prompt_len = lm_sequence(tokenizer, src, tgt)
        n = len(sequence) - 1
        assert inputs[row, :n].tolist() == sequence[:-1]
        # position t predicts id t + 1: the prompt's positions but its last (the separator) predict nothing
        assert labels[row, :n].tolist() == [pad] * (prompt_len - 1) + sequence[prompt_len:]
        assert labels[row, n:].eq(pad).all() and inputs[row, n:].eq(pad).all()
    assert examples.sizes() == [len(lm_sequence(tokenizer, s, t)[0]) - 1 for s, t in [("abc", "xy"), ("a", "bcde")]]
    with pytest.raises(ValueError, match="joint vocabulary"):
        encode_split([("a", "b")], tokenizer, CharTokenizer.from_texts(["ab"]), decoder_only=True)


def test_the_loss_ignores_the_source_positions(tokenizer: CharTokenizer) -> None:
    model = tiny_model(tokenizer)
    examples = encode_split([("abcdef", "xyz")], tokenizer, tokenizer, decoder_only=True)
    _, inputs, labels = batch_tensors(examples, [0], "cpu", tokenizer.pad_id)
    prompt_len = len(examples.src[0])
    logits = model.lm(inputs).detach().requires_grad_(True)
    loss = label_smoothed_loss(logits, labels, pad_id=tokenizer.pad_id, smoothing=0.1)
    loss.backward()
    per_position = logits.grad[0].abs().sum(-1)  # (T,)
    assert per_position[: prompt_len - 1].eq(0).all()  # the source positions: no gradient at all
    assert per_position[prompt_len - 1 :].gt(0).all()  # the separator's and the target's: a gradient each
    # Any prediction at a source position may change: the loss stays the same, bit for bit.
    changed = logits.detach().clone()
    noise = torch.randn(prompt_len - 1, changed.size(-1), generator=torch.Generator().manual_seed(1))
    changed[0, : prompt_len - 1] = noise
    assert torch.equal(label_smoothed_loss(changed, labels, pad_id=tokenizer.pad_id, smoothing=0.1), loss.detach())


# --- a run, its checkpoint and its pipeline --------------------------------------------------------


@pytest.fixture(scope="module")
def decoder_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("decoder-copy")
    records: list[Progress] = []
    result = train(tiny_config(out, eval_every_steps=60, positional="learned"), callback=records.append)
    return out, result, records


def test_a_decoder_only_run_learns_and_says_what_it_is(decoder_run) -> None:
    out, result, records = decoder_run
    losses = [r.loss for r in records if r.phase == "train"]
    assert result.step == 120 and losses[-1] < 0.5 * losses[0], losses
    loaded = load_checkpoint(out)
    assert loaded.config.decoder_only and loaded.config.n_encoder_layers == 0 and loaded.config.n_decoder_layers == 2
    assert loaded.config.positional == "learned" and loaded.config.tying == "generator"
    assert loaded.meta["architecture"] == "decoder" and loaded.meta["train_args"]["architecture"] == "decoder"
    assert loaded.meta["sequence_format"]["separator"] == "<s>"
    assert list_snapshots(out) == [0, 1, 2, 5, 10, 20, 50, 100, 120]
    assert any("exact_match" in r for r in read_log(out))


def test_load_pretrained_gives_a_decoder_pipeline_whose_translate_is_the_greedy_continuation(decoder_run) -> None:
    out, _, _ = decoder_run
    pipe = load_pretrained(out)
    assert isinstance(pipe, TaskLMPipeline) and pipe.kind == "decoder"
    assert pipe.src_tokenizer is pipe.tgt_tokenizer is pipe.tokenizer
    model, tok = pipe.model, pipe.tokenizer
    for text in ("abcd", "q1", "zz9x"):
        ids = prompt_ids(tok, text)
        prompt_len = len(ids)
        with torch.no_grad():  # by hand: the argmax of model.lm's last row, until EOS
            while len(ids) - prompt_len < 12:
                next_id = int(model.lm(torch.tensor([ids]))[0, -1].argmax())
                if next_id == tok.eos_id:
                    break
                ids.append(next_id)
        expected = tok.decode(ids[prompt_len:])
        assert pipe.translate(text) == expected
        traced = pipe.trace(text)
        assert traced.output_ids == ids[prompt_len:] and traced.src_ids == prompt_ids(tok, text)
        assert traced.src_pieces[-1] == "<s>" and traced.decoder_ids == ids
    assert pipe.translate(["abcd", "q1", "zz9x"]) == [pipe.translate(t) for t in ("abcd", "q1", "zz9x")]
    assert isinstance(pipe.translate("abcd", beam_size=3), str)
    assert pipe.generate("abcd") == pipe.translate("abcd") == pipe.translate("abcd", max_len=12, length_penalty=None)
    with pytest.raises(ValueError, match="no chat template"):
        pipe.generate("abcd", chat=True)
    assert isinstance(load_pretrained(out, step=50), TaskLMPipeline)
    with pytest.raises(ValueError, match="nothing to translate"):
        pipe.translate("   ")


@pytest.mark.parametrize("positional", ["interleaved", "learned"])
def test_a_decoder_checkpoint_loads_back_with_identical_logits(tmp_path: Path, tokenizer: CharTokenizer,
                                                               positional: str) -> None:
    model = tiny_model(tokenizer, positional=positional)
    save_checkpoint(tmp_path, model, tokenizer, tokenizer, {"architecture": "decoder"})
    pipe = load_pretrained(tmp_path)
    ids = torch.tensor([lm_sequence(tokenizer, "abc", "xyz")[0]])
    with torch.no_grad():
        assert torch.equal(pipe.lm_logits(ids), model.lm(ids))
    assert pipe.encode_prompt("abc").tolist() == [prompt_ids(tokenizer, "abc")]


# --- the command line and the comparison ----------------------------------------------------------


@pytest.mark.parametrize(("argv", "message"), [
    (["--architecture", "decoder", "--separate-vocab"], "one joint vocabulary"),
    (["--architecture", "lstm"], "invalid choice: 'lstm'"),
    (["--positional", "rotary"], "invalid choice: 'rotary'"),
    (["--architecture", "decoder", "--d-model", "30", "--n-heads", "4"], "divisible by n_heads"),
])
def test_cli_bad_decoder_arguments_say_what_is_wrong(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_translate_command_line_reads_a_decoder_checkpoint(decoder_run, capsys: pytest.CaptureFixture[str]) -> None:
    out, _, _ = decoder_run
    assert translate_main(["--model", str(out), "--beam-size", "2", "--length-penalty", "0.6", "abcd"]) == 0
    assert capsys.readouterr().out.strip() == load_pretrained(out).translate("abcd", beam_size=2, length_penalty=0.6)


def test_the_comparison_trains_both_architectures_to_the_target(tmp_path: Path) -> None:
    cfg = tiny_config(tmp_path, n_layers=1, eval_every_steps=40, max_steps=80, snapshots=False)
    runs = compare_architectures(cfg, target=0.01)  # any output right: both reach it at the first evaluation
    assert [r.architecture for r in runs] == ["encoder-decoder", "decoder"]
    assert [r.n_layers for r in runs] == [1, 2]  # the decoder-only model: as many layers as both stacks
    assert runs[0].parameters != runs[1].parameters
    for run in runs:
        if run.reached:
            assert run.steps % 40 == 0 and 0 < run.seconds <= run.wall_seconds and run.exact_match >= 0.01
        assert load_checkpoint(run.out).meta["architecture"] == run.architecture
    with pytest.raises(ValueError, match="eval_every_steps"):
        compare_architectures(dataclasses.replace(cfg, eval_every_steps=None), target=0.5)


def test_a_decoder_run_resumes_as_a_decoder(tmp_path: Path) -> None:
    train(tiny_config(tmp_path / "first", max_steps=4, snapshots=False))
    resumed = train(TrainConfig(resume=str(tmp_path / "first"), out=str(tmp_path / "more"), max_steps=6,
                                max_seconds=None, threads=1, snapshots=False))
    loaded = load_checkpoint(resumed.out)
    assert resumed.step == 6 and loaded.config.decoder_only and loaded.meta["architecture"] == "decoder"
