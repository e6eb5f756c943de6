"""Training: schedule, loss, batching, the loop (progress, stop, divergence, resume), threads, CLI and DDP."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import transformer.train.loop as loop_module
from transformer.checkpoints.checkpoint import list_snapshots, load_checkpoint, read_log, thin_steps
from transformer.pipeline import Pipeline
from transformer.text.ids import source_ids
from transformer.train import (
    Progress,
    TrainConfig,
    TrainingDiverged,
    check_config,
    is_snapshot_step,
    learning_rate,
    main,
    make_splits,
    train,
)
from transformer.train.batching import token_batches
from transformer.train.loss import bleu_chrf, exact_match, label_smoothed_loss, token_accuracy_counts
from transformer.train.runtime import configure_threads, threads_to_set
from transformer.train.schedule import factor_for_peak, noam_lr

REPO = Path(__file__).resolve().parents[1]


def tiny_config(out: Path, **changes) -> TrainConfig:
    """A copy task small enough to learn in a few seconds on one busy CPU core."""
    base = TrainConfig(task="copy", task_options={"min_len": 2, "max_len": 6}, n_train=1000, n_valid=40,
                       n_test=40, tokenizer="char", d_model=64, n_heads=2, n_layers=1, d_ff=128, dropout=0.0,
                       warmup=30, lr=5e-3, batch_tokens=256, max_steps=150, max_seconds=None,
                       eval_every=1e9, log_every=10, threads=1, out=str(out))
    return dataclasses.replace(base, **changes)


# --- schedule ---------------------------------------------------------------------------


def test_noam_schedule_at_known_steps() -> None:
    # The paper's base model: d_model 512, warmup 4000.
    assert noam_lr(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert noam_lr(1, 512, 4000) == pytest.approx(1.7469e-7, rel=1e-4)
    assert noam_lr(4000, 512, 4000) == pytest.approx(6.9877e-4, rel=1e-4)  # the peak
    assert noam_lr(16000, 512, 4000) == pytest.approx(3.4939e-4, rel=1e-4)  # half the peak at 4x warmup
    assert noam_lr(2000, 512, 4000) == pytest.approx(noam_lr(4000, 512, 4000) / 2)  # linear warmup
    assert noam_lr(0, 512, 4000) == noam_lr(1, 512, 4000)
    assert noam_lr(100, 128, 50, factor=3.0) == pytest.approx(3 * noam_lr(100, 128, 50))
    peak = max(noam_lr(s, 128, 200) for s in range(1, 1000))
    assert peak == noam_lr(200, 128, 200)
    assert noam_lr(200, 128, 200, factor_for_peak(1e-3, 128, 200)) == pytest.approx(1e-3)
    with pytest.raises(ValueError):
        noam_lr(1, 512, 0)


def test_learning_rate_options() -> None:
    cfg = TrainConfig(d_model=128, warmup=100, lr=2e-3)
    assert learning_rate(cfg, 100) == pytest.approx(2e-3)
    constant = dataclasses.replace(cfg, schedule="constant")
    assert learning_rate(constant, 1) == learning_rate(constant, 5000) == 2e-3


def test_cooldown_scales_the_last_steps_down_linearly() -> None:
    cfg = TrainConfig(d_model=128, warmup=100, lr=2e-3, max_steps=1000, cooldown=200)
    plain = dataclasses.replace(cfg, cooldown=0)
    rate = learning_rate
    assert [rate(cfg, s) for s in (1, 100, 500, 800)] == [rate(plain, s) for s in (1, 100, 500, 800)]
    start = rate(plain, 800)
    assert rate(cfg, 801) == pytest.approx(start * 200 / 201)
    assert rate(cfg, 900) == pytest.approx(start * 101 / 201)
    assert rate(cfg, 1000) == pytest.approx(start / 201)
    rates = [rate(cfg, s) for s in range(800, 1001)]
    assert all(a > b > 0 for a, b in zip(rates, rates[1:], strict=False))
    constant = dataclasses.replace(cfg, schedule="constant")
    assert rate(constant, 900) == pytest.approx(2e-3 * 101 / 201)
    with pytest.raises(ValueError, match="cooldown needs max_steps"):
        check_config(dataclasses.replace(cfg, max_steps=None))


def test_snapshot_steps_are_geometric() -> None:
    steps = [s for s in range(0, 10001) if is_snapshot_step(s)]
    assert steps == [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]


# --- loss and scores -----------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_equals_torch(smoothing: float) -> None:
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = 0  # padding
    target[2, 1:] = 0
    ours = label_smoothed_loss(logits, target, pad_id=0, smoothing=smoothing)
    theirs = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=0, label_smoothing=smoothing)
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-6)
    (grad_ours,) = torch.autograd.grad(ours, logits)
    (grad_theirs,) = torch.autograd.grad(theirs, logits)
    torch.testing.assert_close(grad_ours, grad_theirs)
    total = label_smoothed_loss(logits, target, pad_id=0, smoothing=smoothing, reduction="sum")
    assert total.item() == pytest.approx(ours.item() * int((target != 0).sum()), rel=1e-6)


def test_token_accuracy_and_text_scores() -> None:
    logits = torch.tensor([[[0.0, 0, 5, 0], [0, 0, 0, 5], [5, 0, 0, 0]]])  # argmax 2, 3, 0
    assert token_accuracy_counts(logits, torch.tensor([[2, 1, 0]]), pad_id=0) == (1, 2)
    assert exact_match(["ein haus ", "zwei"], ["ein haus", "drei"]) == 0.5
    bleu, chrf = bleu_chrf(["the cat sat on the mat"], ["the cat sat on the mat"])
    assert bleu == pytest.approx(100) and chrf == pytest.approx(100)


# --- batching ------------------------------------------------------------------------------


def test_token_batches_respect_the_budget_and_cover_every_example_once() -> None:
    import random

    rng = random.Random(1)
    sizes = [rng.randint(1, 40) for _ in range(500)]
    budget = 200
    batches = token_batches(sizes, budget, seed=3, epoch=0)
    flat = sorted(i for batch in batches for i in batch)
    assert flat == list(range(500))
    for batch in batches:
        assert len(batch) * max(sizes[i] for i in batch) <= budget
        assert max(sizes[i] for i in batch) - min(sizes[i] for i in batch) <= 3  # similar lengths
    assert token_batches(sizes, budget, seed=3, epoch=0) == batches  # seeded
    assert token_batches(sizes, budget, seed=3, epoch=1) != batches  # a new order every epoch
    assert token_batches(sizes, budget, seed=4, epoch=0) != batches
    # An example longer than the budget gets a batch of its own; the others still fit the budget.
    over = token_batches([1, 1, 1, 1, 1, 50], 10, seed=0)
    assert [5] in over
    assert sorted(i for batch in over if batch != [5] for i in batch) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        token_batches(sizes, 0)


# --- the training loop -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("copy")
    records: list[Progress] = []
    result = train(tiny_config(out, eval_every_steps=50), callback=records.append)
    return out, result, records


def test_short_training_run_learns_copy(copy_run) -> None:
    out, result, records = copy_run
    losses = [r.loss for r in records if r.phase == "train"]
    assert result.step == 150 and result.stop_reason == "max_steps"
    assert losses[-1] < 0.4 * losses[0], losses
    assert result.metrics["test"]["token_accuracy"] > 0.8
    assert 0.0 <= result.metrics["test"]["exact_match"] <= 1.0


def test_progress_reports_and_log(copy_run) -> None:
    out, result, records = copy_run
    train_records = [r for r in records if r.phase == "train"]
    assert [r.step for r in train_records] == list(range(10, 151, 10))
    assert all(r.lr > 0 and r.elapsed >= 0 and r.tokens_per_second > 0 for r in train_records)
    evals = [r for r in records if r.phase == "eval"]
    assert [r.step for r in evals] == [50, 100, 150]  # every 50 steps, then the final one
    assert set(evals[0].metrics) == {"val_loss", "token_accuracy", "exact_match", "bleu", "chrf"}
    test = [r for r in records if r.phase == "test"]
    assert len(test) == 1 and "test_exact_match" in test[0].metrics
    assert records[-1].phase == "done" and all(k.startswith("test_") for k in records[-1].metrics)
    assert set(result.metrics) == {"valid", "test"} and "loss" in result.metrics["test"]
    log = read_log(out)
    assert [r["step"] for r in log if r["phase"] == "train"] == [r.step for r in train_records]
    assert any("exact_match" in r for r in log)


def test_the_run_leaves_a_loadable_checkpoint(copy_run) -> None:
    out, result, _ = copy_run
    loaded = load_checkpoint(out)
    assert loaded.meta["step"] == 150 and loaded.meta["task"] == "copy"
    assert loaded.meta["metrics"]["test"] == result.metrics["test"]
    assert loaded.meta["train_args"]["d_model"] == 64
    pipe = Pipeline.from_checkpoint(loaded)
    splits = make_splits(TrainConfig.from_saved(loaded.meta["train_args"]))
    longest = max(len(pipe.source_ids(src, warn=False)[1]) for src, _ in splits.train)
    assert loaded.meta["longest_source"] == longest  # tokens + EOS, as the pipeline counts them
    assert loaded.config.tying == "all"  # one shared char vocabulary
    assert list_snapshots(out) == [0, 1, 2, 5, 10, 20, 50, 100, 150]
    early = load_checkpoint(out, step=0).model.src_embed.weight
    assert not torch.equal(early, loaded.model.src_embed.weight)
    src = torch.tensor([source_ids(loaded.src_tokenizer, "abc")])
    from transformer.decoding import greedy_decode

    decoded = greedy_decode(loaded.model, src, max_len=10)
    assert loaded.tgt_tokenizer.decode(decoded.tokens[0]) == "abc"


def test_stop_event_ends_the_run_early_and_saves_it(tmp_path: Path) -> None:
    stop = threading.Event()
    records: list[Progress] = []

    def on_progress(progress: Progress) -> None:
        records.append(progress)
        if progress.step >= 20:
            stop.set()

    config = tiny_config(tmp_path, max_steps=1000, max_seconds=None, log_every=5, eval_every_steps=10)
    result = train(config, callback=on_progress, stop_event=stop)
    assert result.stop_reason == "stopped"
    assert result.step == 21 < config.max_steps  # set after step 20's report; step 21 sees it and is the last
    assert [r.step for r in records if r.phase == "eval"] == [10]  # step 20's evaluation ends at once
    assert "test" not in result.metrics and records[-1].phase == "done"  # no final evaluations
    assert load_checkpoint(tmp_path).meta["step"] == result.step


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    real = loop_module.label_smoothed_loss

    def poisoned(*args, **kwargs):  # the training step's loss (evaluation looks its own name up)
        calls["n"] += 1
        loss = real(*args, **kwargs)
        return loss * float("nan") if calls["n"] == 7 else loss  # step 7's loss

    monkeypatch.setattr(loop_module, "label_smoothed_loss", poisoned)
    config = tiny_config(tmp_path, max_steps=20, eval_every_steps=5, eval_sentences=5, log_every=1)
    with pytest.raises(TrainingDiverged, match=r"loss became nan at step 7.*last good checkpoint.*\(step 5\)"):
        train(config)
    loaded = load_checkpoint(tmp_path)
    assert loaded.meta["step"] == 5
    assert all(torch.isfinite(p).all() for p in loaded.model.parameters())
    assert math.isnan(read_log(tmp_path)[-1]["loss"])  # the chart shows where it diverged


def test_runs_are_reproducible_on_cpu(tmp_path: Path) -> None:
    """Weights, data order and dropout masks all come from the run's own generators: the same seed
    gives the same run whatever torch's global generator holds (other sessions draw from it)."""
    config = tiny_config(tmp_path / "a", max_steps=12, log_every=1, test_sentences=5, dropout=0.1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        train(config)
        torch.manual_seed(99)
        train(dataclasses.replace(config, out=str(tmp_path / "b")))
    losses = [[r["loss"] for r in read_log(tmp_path / name) if r["phase"] == "train"] for name in "ab"]
    assert losses[0] == losses[1] and len(losses[0]) == 12
    first, second = (load_checkpoint(tmp_path / name).model for name in "ab")
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters(), strict=True))


def test_a_run_leaves_the_process_wide_generators_alone(tmp_path: Path) -> None:
    """The app trains in a thread of a server that every session shares: no reseeding, no draws, dropout
    included."""
    import random

    import numpy as np

    states = torch.random.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    train(tiny_config(tmp_path / "a", max_steps=3, test_sentences=5, dropout=0.2, tokenizer="bpe", vocab_size=60))
    assert torch.equal(torch.random.get_rng_state(), states[0])
    assert random.getstate() == states[1]
    assert (np.random.get_state()[1] == states[2]).all()
    first = load_checkpoint(tmp_path / "a").model
    torch.manual_seed(123)  # whatever the global generator holds, the same seed gives the same model
    train(tiny_config(tmp_path / "b", max_steps=3, test_sentences=5, dropout=0.2, tokenizer="bpe", vocab_size=60))
    second = load_checkpoint(tmp_path / "b").model
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters(), strict=True))


def test_half_precision_snapshots_thinned_to_max_snapshots(tmp_path: Path) -> None:
    result = train(tiny_config(tmp_path, max_steps=37, test_sentences=5, snapshot_dtype="float16",
                               max_snapshots=4))
    assert result.step == 37
    assert list_snapshots(tmp_path) == thin_steps([0, 1, 2, 5, 10, 20, 37], 4)
    final = load_checkpoint(tmp_path).model
    last = load_checkpoint(tmp_path, step=37).model  # stored as float16, loaded as float32
    for p, q in zip(final.parameters(), last.parameters(), strict=True):
        assert q.dtype == torch.float32
        torch.testing.assert_close(q, p, atol=2e-3, rtol=1e-3)
    assert load_checkpoint(tmp_path).meta["train_args"]["max_snapshots"] == 4


@pytest.mark.parametrize("requested, device_type, on_main_thread, expected", [
    (None, "cpu", True, 7),  # the CLI: the default for this machine
    (None, "cpu", False, None),  # the app's background thread: the process-wide count is left alone
    (2, "cpu", False, 2),  # asked for explicitly
    (2, "cpu", True, 2),
    (None, "cuda", True, None),  # GPU runs leave the CPU threads alone
    (2, "cuda", False, None),
])
def test_threads_are_set_only_when_asked_or_on_the_main_thread(
    requested: int | None, device_type: str, on_main_thread: bool, expected: int | None
) -> None:
    assert threads_to_set(requested, device_type=device_type, on_main_thread=on_main_thread, default=7) == expected


def test_configure_threads_tells_the_main_thread_from_a_background_one(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    cpu = torch.device("cpu")
    worker = threading.Thread(target=configure_threads, args=(None, cpu))
    worker.start()
    worker.join(timeout=60)
    assert calls == []  # the app's training thread
    configure_threads(None, cpu)  # the test's (main) thread: the default for this machine
    configure_threads(3, cpu)
    assert len(calls) == 2 and calls[0] >= 1 and calls[1] == 3


def test_resume_continues_exactly(tmp_path: Path) -> None:
    straight = train(tiny_config(tmp_path / "straight", max_steps=40, log_every=1, test_sentences=5))
    train(tiny_config(tmp_path / "half", max_steps=20, log_every=1, test_sentences=5))
    resumed = train(tiny_config(tmp_path / "resumed", resume=str(tmp_path / "half"), max_steps=40, log_every=1,
                                test_sentences=5, d_model=32))  # d_model is taken from the checkpoint
    assert resumed.step == straight.step == 40
    full = {r["step"]: r["loss"] for r in read_log(tmp_path / "straight") if r["phase"] == "train"}
    continued = {r["step"]: r["loss"] for r in read_log(tmp_path / "resumed") if r["phase"] == "train"}
    assert sorted(continued) == list(range(1, 41))  # the earlier log was carried over
    for step in range(21, 41):
        assert continued[step] == pytest.approx(full[step], abs=1e-5), step
    assert load_checkpoint(tmp_path / "resumed").config.d_model == 64


# --- command line ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["--task", "nonsense"],
    ["--src-lang", "xx"],
    ["--data", "no/such/file.tsv"],
    ["--d-model", "30", "--n-heads", "4"],
    ["--max-steps", "0"],
    ["--tokenizer", "words"],
    ["--task-option", "max_number"],
    ["--task", "copy", "--task-option", "colour=3"],
    ["--resume", "no/such/folder"],
    ["--batch-tokens", "many"],
    ["--snapshot-dtype", "int8"],
    ["--max-snapshots", "1"],
    ["--cooldown", "10"],  # without --max-steps
    ["--max-steps", "5", "--cooldown", "6"],
])
def test_cli_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_cli_rejects_a_malformed_data_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("one\teins\ntwo\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main(["--data", str(path)])
    assert exit_info.value.code == 2
    assert "line 2" in capsys.readouterr().err


def test_cli_trains_on_a_data_file(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{w}\t{w.upper()}\n" for w in ("abc", "de", "fgh", "ij", "klm", "nop", "qr", "st",
                                                            "uvw", "xyz", "ab", "cd")), encoding="utf-8")
    assert main(["--data", str(path), "--tokenizer", "char", "--d-model", "16", "--n-heads", "2",
                 "--n-layers", "1", "--d-ff", "32", "--max-steps", "3", "--threads", "1", "--quiet",
                 "--out", str(tmp_path / "run")]) == 0
    loaded = load_checkpoint(tmp_path / "run")
    assert loaded.meta["task"] == "custom" and loaded.meta["train_args"]["data"] == str(path)
    assert loaded.config.src_vocab_size == loaded.src_tokenizer.vocab_size


def test_cli_trains_and_saves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    code = main(["--task", "reverse", "--task-option", "max_len=4", "--n-train", "200", "--tokenizer", "char",
                 "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--d-ff", "32", "--max-steps", "5",
                 "--threads", "1", "--device", "cpu", "--quiet", "--out", str(tmp_path)])
    assert code == 0
    assert "5 steps" in capsys.readouterr().out
    assert load_checkpoint(tmp_path).meta["train_args"]["task_options"] == {"max_len": 4}
    # --threads reached torch (runtime.threads_to_set decides, the run sets it); pinned to the CPU, as the
    # default device "auto" picks CUDA on a GPU machine, where the CPU threads are left alone
    assert threads == [1]

    # the same --out again: refused (exit 2), the checkpoint untouched; --overwrite replaces it
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    tiny = ["--task", "reverse", "--task-option", "max_len=4", "--n-train", "200", "--tokenizer", "char",
            "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--d-ff", "32", "--max-steps", "2",
            "--threads", "1", "--quiet", "--out", str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        main(tiny)
    assert exit_info.value.code == 2
    assert "already holds a checkpoint" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    assert main([*tiny, "--overwrite"]) == 0
    assert load_checkpoint(tmp_path).meta["step"] == 2
    with pytest.raises(ValueError, match="already holds a checkpoint"):  # the Python API refuses too
        train(TrainConfig(task="reverse", n_train=50, tokenizer="char", d_model=16, n_heads=2, n_layers=1, d_ff=32,
                          max_steps=1, threads=1, out=str(tmp_path)))


# --- data parallel -------------------------------------------------------------------------------


@pytest.mark.slow
def test_ddp_on_two_processes_matches_one_process(tmp_path: Path) -> None:
    args = ["--task", "copy", "--task-option", "max_len=6", "--n-train", "300", "--tokenizer", "char",
            "--d-model", "32", "--n-heads", "2", "--n-layers", "1", "--d-ff", "64", "--dropout", "0",
            "--batch-tokens", "128", "--max-steps", "4", "--max-seconds", "600", "--log-every", "1",
            "--eval-sentences", "4", "--no-snapshots", "--threads", "1", "--device", "cpu", "--quiet"]
    # A CPU run on any machine: --device cpu for both runs (the single one runs in this process); the two processes
    # then join with gloo even where a GPU is visible (test_cpu_run_joins_with_gloo_on_a_gpu_machine)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "transformer.train", *args, "--out", str(tmp_path / "ddp")]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert main([*args, "--out", str(tmp_path / "single")]) == 0

    def losses(folder: Path) -> list[float]:
        return [r["loss"] for r in read_log(folder) if r["phase"] == "train"]

    ddp, single = losses(tmp_path / "ddp"), losses(tmp_path / "single")
    assert len(ddp) == len(single) == 4
    assert ddp == pytest.approx(single, abs=1e-5)
    assert load_checkpoint(tmp_path / "ddp").meta["world_size"] == 2


def test_config_from_saved_train_args_ignores_unknown_keys() -> None:
    saved = dataclasses.asdict(TrainConfig(task="reverse", seed=3, d_model=32)) | {"a_field_of_another_version": 1}
    cfg = TrainConfig.from_saved(saved)
    assert (cfg.task, cfg.seed, cfg.d_model) == ("reverse", 3, 32)
    assert cfg == TrainConfig(task="reverse", seed=3, d_model=32)


def test_page_defaults_make_a_valid_config_for_every_task():
    """Each built-in task's default run on the Training page is a config the trainer accepts,
    with the string tasks and sentences pre-LN (the shipped reverse model's recipe)."""
    from transformer.text.tasks import TASKS
    from transformer.train import check_config
    from ui.models.training import make_config
    from ui.models.training_defaults import page_choices, promise

    for task in TASKS:
        config = make_config(**page_choices(task))
        check_config(config)
        assert config.task == task and config.max_seconds == 60
        assert config.norm_first == (task in ("copy", "reverse", "sort", "sentences"))
    assert promise(None) is None  # a user's own pairs: no promise
    with pytest.raises(ValueError, match="unknown task"):
        page_choices("translate")


def test_bleu_note_only_for_a_zero_bleu_on_single_words():
    from ui.models.training_defaults import bleu_note, single_word_targets

    assert single_word_targets("reverse", {"max_len": 12}, "en", "de")
    assert not single_word_targets("sentences", {"max_clauses": 1}, "en", "de")
    assert not single_word_targets(None, {}, "en", "de")
    assert "chrF" in bleu_note({"bleu": 0.0, "chrf": 99.0}, True)
    assert bleu_note({"bleu": 0.0}, False) is None
    assert bleu_note({"bleu": 35.0}, True) is None


def test_task_fit_scores_leave_bleu_out_of_character_tasks():
    import sacrebleu

    from transformer.train.scores import task_scores
    from ui.charts import training as tc

    # the reason: a right reversed string has BLEU 0 (no word 4-grams) and chrF 100
    assert sacrebleu.corpus_bleu(["cba"], [["cba"]]).score == 0.0
    assert sacrebleu.corpus_chrf(["cba"], [["cba"]]).score == 100.0
    for task, kind in (("reverse", "char"), ("copy", "bpe"), ("sort", "char"), (None, "char")):
        fit = task_scores(task, kind)
        assert "bleu" not in fit.names and {"exact_match", "chrf"} <= set(fit.names) and "BLEU" in fit.why
    for task in ("numbers", "dates", "sentences", None):
        assert {"bleu", "chrf"} <= set(task_scores(task, "bpe").names)
    frame = tc.progress_frame([{"step": 1, "metrics": {"bleu": 0.0, "chrf": 98.0}}])
    names = {t.name for t in tc.training_curves_chart(frame, task_scores("reverse", "char").names).data}
    assert "chrF" in names and "BLEU" not in names
    assert "BLEU" in {t.name for t in tc.training_curves_chart(frame).data}


def test_cpu_run_joins_with_gloo_on_a_gpu_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """NCCL cannot reduce CPU tensors: a --device cpu run on a machine with CUDA must pick gloo."""
    import torch.distributed as dist

    from transformer.train import runtime

    chosen = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(runtime.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend: chosen.append(backend))
    monkeypatch.setattr(dist, "get_rank", lambda: 0)
    monkeypatch.setattr(dist, "get_world_size", lambda: 2)
    runtime.setup_distributed("cpu")
    runtime.setup_distributed("cuda")
    assert chosen == ["gloo", "nccl"]
