"""Issue 41 item 8: the Training page's architecture switch and "Train both", a decoder-only run beside its
encoder-decoder twin (figures read off the logs, the attention that reads the source side by side), and a
decoder-only run of ours as the sidebar's model on the pages the language-model path supports."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import app_helpers
import numpy as np
import pytest
import torch
from app_helpers import assert_clean

from transformer.checkpoints.checkpoint import read_config, read_log, save_checkpoint
from transformer.checkpoints.train_log import append_log
from transformer.network.model import Transformer
from transformer.pipeline import Pipeline, load_pretrained
from transformer.task_lm import TaskLMPipeline
from transformer.text.tasks import make_task
from transformer.text.tokenizers import build_tokenizers
from transformer.train import TrainConfig
from transformer.train.compare import decoder_twin, time_in_log
from transformer.train.config import model_config
from ui.compute.analysis import analyse
from ui.compute.examples import expected_output
from ui.compute.source_attention import source_attention
from ui.models import runs, training, training_compare, training_job
from ui.state import settings

RECIPE = TrainConfig(task="reverse", task_options={"max_len": 6}, tokenizer="char", d_model=16, n_heads=2,
                     n_layers=1, d_ff=32, max_len=48, seed=3)
ED_RUN, DECODER_RUN = "reverse-20261201-101000-aaaaaaaa", "reverse-decoder-20261201-101001-bbbbbbbb"


def save_run(folder: Path, cfg: TrainConfig, log: list[dict]) -> Path:
    """A checkpoint of ``cfg``'s network with random weights (seeded), its train_args and ``log`` as a run writes."""
    splits = make_task(cfg.task, n_train=200, n_valid=0, n_test=0, seed=cfg.seed, **cfg.task_options)
    tokenizer = build_tokenizers(splits, kind="char", shared=True)[0]
    model = Transformer(model_config(cfg, tokenizer, tokenizer))
    model.reset_parameters(torch.Generator().manual_seed(cfg.seed))
    meta = {"task": cfg.task, "task_options": cfg.task_options, "src_lang": "en", "tgt_lang": "de", "step": 20,
            "train_args": dataclasses.asdict(cfg), "parameters": model.num_parameters(),
            "architecture": cfg.architecture, "max_output_len": 10}
    save_checkpoint(folder, model.eval(), tokenizer, tokenizer, meta)
    for record in log:
        append_log(folder, record)
    return folder


def log_reaching(at_step: int) -> list[dict]:
    """A log whose second evaluation (step 20) reaches 97% when ``at_step`` is 20 (else none does)."""
    return [{"phase": "train", "step": 10, "elapsed": 1.0, "loss": 2.0},
            {"phase": "eval", "step": 10, "elapsed": 1.5, "exact_match": 0.25, "val_loss": 1.5},
            {"phase": "train", "step": 20, "elapsed": 2.5, "loss": 1.0},
            {"phase": "eval", "step": 20, "elapsed": 3.25, "exact_match": 0.98 if at_step == 20 else 0.5}]


@pytest.fixture
def twin_runs(tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The tiny shipped models, and in the runs folder an encoder-decoder run with its decoder-only twin."""
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setenv(settings.RUNS_DIR_ENV, str(tmp_path / "runs"))
    folders = {"encoder-decoder": save_run(tmp_path / "runs" / ED_RUN, RECIPE, log_reaching(0)),
               "decoder": save_run(tmp_path / "runs" / DECODER_RUN, decoder_twin(RECIPE), log_reaching(20))}
    return folders


def label_of(folder: Path) -> str:
    return next(run.label for run in runs.saved_runs() if run.folder == folder.resolve())


# --- a decoder-only run of ours on the pages ------------------------------------------------------------


def test_a_decoder_only_run_gives_the_app_what_its_language_model_path_reads(twin_runs) -> None:
    pipe = load_pretrained(twin_runs["decoder"])
    assert isinstance(pipe, TaskLMPipeline) and not pipe.has_chat_template and pipe.eos_ids == (pipe.config.eos_id,)
    ids = pipe.prompt_ids("abc")
    assert ids == [*pipe.tokenizer.encode("abc"), pipe.config.bos_id] == pipe.encode_prompt("abc")[0].tolist()
    assert pipe.tokenizer.display_pieces(ids) == ["a", "b", "c", "<s>"]
    assert pipe.tokenizer.special_ids == frozenset({0, 1, 2, 3}) and pipe.max_prompt_tokens == 47
    with pytest.raises(ValueError, match="chat template"):
        pipe.prompt_ids("abc", chat=True)
    traced = pipe.trace("abc", chat=False, max_new_tokens=3)
    assert len(traced.output_ids) <= 3
    # the task has a rule: its expected output, as for the encoder-decoder runs (was "no expected output")
    assert expected_output(pipe, "abc", []) == "Expected output: cba"


@pytest.mark.parametrize("page", ["1_model", "2_tokenization", "10_training"])
def test_a_decoder_only_run_selected_in_the_sidebar_renders(twin_runs, page: str) -> None:
    """The sidebar read ``has_chat_template`` and the Tokenization page ``special_ids``, which ours lacked."""
    at = app_helpers.open_page(page, "abc", label_of(twin_runs["decoder"]))
    assert_clean(at)
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).value == label_of(twin_runs["decoder"])
    if page == "2_tokenization":
        assert any("separator" in c.value for c in at.caption)  # the prompt ends with <s>, said so
        assert any("Expected output: cba" in c.value for c in at.sidebar.caption)


# --- the pair side by side --------------------------------------------------------------------------------


def test_twins_are_found_by_recipe_and_depth(twin_runs) -> None:
    from ui.models.menu import available_models

    pairs = training_compare.twin_pairs(available_models())
    assert [(ed.folder, dec.folder) for ed, dec in pairs] == [(twin_runs["encoder-decoder"].resolve(),
                                                               twin_runs["decoder"].resolve())]
    key = training_compare.twin_key
    assert key(dataclasses.asdict(RECIPE), 2) == key(dataclasses.asdict(decoder_twin(RECIPE)), 2)
    assert key(dataclasses.asdict(RECIPE), 2) != key(dataclasses.asdict(dataclasses.replace(RECIPE, seed=4)), 2)


def test_the_side_by_side_attention_is_the_traces_weights(twin_runs) -> None:
    """The encoder-decoder's cross-attention as its trace has it; the decoder-only model's self-attention from the
    separator and answer rows to the source columns, cut from its trace of ``source <s> answer``."""
    text = "abcd"
    ed, dec = (load_pretrained(twin_runs[name]) for name in ("encoder-decoder", "decoder"))
    assert isinstance(ed, Pipeline) and isinstance(dec, TaskLMPipeline)
    ed_trace, dec_trace = ed.trace(text), dec.trace(text)
    n_source = len(dec.tokenizer.encode(text))
    for layer in range(2):
        lm_side = source_attention(analyse("test:dec", "cpu", dec, text), layer)
        expected = dec_trace.trace.attention("decoder", layer)[0][:, n_source:, :n_source].double().numpy()
        assert lm_side.decoder_only and np.array_equal(lm_side.weights, expected)
        assert lm_side.src_tokens == list("abcd") and lm_side.tgt_tokens[0] == "<s>"
        assert len(lm_side.tgt_tokens) == 1 + len(dec_trace.output_ids) == lm_side.weights.shape[1]
    side = source_attention(analyse("test:ed", "cpu", ed, text), 0)
    assert np.array_equal(side.weights, ed_trace.trace.attention("cross", 0)[0].double().numpy())
    assert side.src_tokens == [*"abcd", "</s>"] and not side.decoder_only


def test_the_training_page_shows_the_pair_with_figures_from_their_logs(twin_runs) -> None:
    at = app_helpers.open_page("10_training", "abc", label_of(twin_runs["decoder"]))
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "steps to 97%" in d.value.columns)
    assert list(table["architecture"]) == ["encoder-decoder", "decoder-only"]
    assert list(table["layers"]) == ["1 + 1", "2"]
    for row, name in zip(table.itertuples(index=False), ("encoder-decoder", "decoder"), strict=True):
        watch = time_in_log(read_log(twin_runs[name]), training_compare.TARGET)
        assert row[3] == read_config(twin_runs[name])[1]["parameters"]
        assert (None if pd_missing(row[4]) else row[4]) == watch.steps
    # 3.25 s less the evaluations' 0.5 + 0.75 s (binary fractions: exact)
    assert table.iloc[1]["steps to 97%"] == 20 and table.iloc[1]["training seconds to 97%"] == 2.0
    titles = [json.loads(c.proto.spec)["layout"].get("title", {}).get("text") or "" for c in at.get("plotly_chart")]
    assert any("cross-attention" in t for t in titles) and any("answer → source" in t for t in titles)


def pd_missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


# --- training from the page ---------------------------------------------------------------------------------


def tiny_page(at, architecture: str) -> None:
    """The page's smallest run: 3 s of copying 2-6 characters with a model of d_model 16."""
    at.selectbox(key="train_task").set_value("copy")
    at.slider(key="train_max_chars").set_value(6)
    at.select_slider(key="train_n_train").set_value(200)
    at.select_slider(key="train_d_model").set_value(16)
    at.select_slider(key="train_heads").set_value(2)
    at.slider(key="train_layers").set_value(1)
    at.select_slider(key="train_d_ff").set_value(32)
    at.slider(key="train_seconds").set_value(3)
    at.radio(key="train_architecture").set_value(architecture)
    at.run()


@pytest.mark.slow
def test_the_switch_trains_a_decoder_only_model_and_train_both_its_twin(tiny_models_dir: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setenv(settings.RUNS_DIR_ENV, str(tmp_path / "runs"))
    at = app_helpers.open_page("10_training")
    tiny_page(at, "decoder")
    assert_clean(at)
    assert at.checkbox(key="train_separate").disabled  # one joint vocabulary
    at.button(key="train_start").click().run()
    job = at.session_state[training_job.JOB_KEY]
    assert job.join(timeout=120) and job.status == training_job.FINISHED, job.error
    at.run()
    assert_clean(at)
    _, meta = read_config(job.result.out)
    assert meta["architecture"] == "decoder" and meta["train_args"]["n_layers"] == 2  # 2N, N = 1
    assert at.session_state[settings.MODEL] == label_of(Path(job.result.out))  # selected in the sidebar
    assert any("from the answer to the source" in c.proto.spec for c in at.get("plotly_chart"))  # section 4

    at.button(key="train_both").click().run()
    job = at.session_state[training_job.JOB_KEY]
    assert job.n_runs == 2
    assert job.join(timeout=180) and job.status == training_job.FINISHED, job.error
    assert job.run_number == 2 and job.config.architecture == "decoder"
    first = job.earlier_results()[0]
    ed_args, dec_args = (read_config(out)[1]["train_args"] for out in (first.out, job.result.out))
    assert (ed_args["architecture"], ed_args["n_layers"], dec_args["n_layers"]) == ("encoder-decoder", 1, 2)
    assert ed_args["seed"] == dec_args["seed"] and ed_args["task"] == dec_args["task"] == "copy"
    at.run()
    assert_clean(at)
    table = next(d.value for d in at.dataframe if "steps to 97%" in d.value.columns)
    for row, out in zip(table.itertuples(index=False), (first.out, job.result.out), strict=True):
        watch = time_in_log(read_log(out), training_compare.TARGET)
        assert (None if pd_missing(row[4]) else row[4]) == watch.steps
    assert training.run_name(training.for_architecture(RECIPE, "decoder")) == "reverse-decoder"


def test_a_job_of_two_runs_trains_them_one_after_the_other_in_its_slot() -> None:
    """"Train both": one job, one slot; the page reads the current run's config, name and records."""
    seen: list[str] = []

    def fake_train(config, *, callback, stop_event):
        seen.append(config)
        callback({"step": 1, "run": config})
        return f"result of {config}"

    job = training_job.TrainingJob("first", train_fn=fake_train, name="a", then=[("second", "b")]).start()
    assert job.join(timeout=10) and job.status == training_job.FINISHED
    assert seen == ["first", "second"] and job.n_runs == 2 and job.run_number == 2
    assert (job.config, job.name, job.result) == ("second", "b", "result of second")
    assert job.earlier_results() == ["result of first"] and job.records() == [{"step": 1, "run": "second"}]

    def stopped_in_the_first(config, *, callback, stop_event):
        seen.append(config)
        stop_event.set()  # the user pressed Stop: the second run never starts
        return config

    seen.clear()
    job = training_job.TrainingJob("first", train_fn=stopped_in_the_first, then=[("second", "b")]).start()
    assert job.join(timeout=10) and job.status == training_job.STOPPED
    assert seen == ["first"] and job.result == "first" and job.run_number == 1


def test_a_decoder_only_run_of_ours_says_which_characters_it_never_saw(twin_runs) -> None:
    """Our vocabulary has an unknown token (a Hugging Face byte-level one has none): the notice the
    encoder-decoder runs get, once, not repeated by the Tokenization page's retrained-tokenizer fragment."""
    at = app_helpers.open_page("2_tokenization", "ab€", label_of(twin_runs["decoder"]))
    assert not at.exception, [e.value for e in at.exception]
    notices = [w.value for w in at.warning if "€" in w.value]
    assert len(notices) == 1, [w.value for w in at.warning]
