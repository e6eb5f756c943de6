"""Training with the paper's recipe (section 5), every part switchable, and its command line.

    python -m transformer.train --task numbers --src-lang en --tgt-lang de --max-seconds 120 --out runs/numbers-en-de

- Optimizer: Adam with beta_1 = 0.9, beta_2 = 0.98, eps = 1e-9 (section 5.3).
- Learning rate: ``schedule.noam_lr``, warmup then 1/sqrt(step) decay (or constant: ``schedule="constant"``),
  optionally a linear cooldown over the last steps of a ``max_steps`` run (``cooldown``).
- Regularisation: dropout (``TransformerConfig.dropout``), label smoothing (``loss.py``), gradient clipping.
- Batches: examples of similar length under a token budget (``schedule.token_batches``).
- Evaluation: validation loss, token accuracy, exact match of greedy outputs, BLEU and chrF,
  every ``eval_every`` seconds on a few hundred sentences, and on the test split at the end.
- Data parallel: under ``torchrun`` every process takes a shard of each global batch
  (DistributedDataParallel, NCCL on GPUs, gloo on CPU); only rank 0 writes.

Sequences: the encoder reads ``tokens + [EOS]``; the decoder reads ``[BOS] + tokens`` and
learns to predict ``tokens + [EOS]`` (``source_ids`` / ``target_ids``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import checkpoint as ckpt
from ..decoding import greedy_decode
from ..network.config import TransformerConfig
from ..network.model import Transformer
from ..text import tasks as data_module
from ..text.ids import PAD_ID, pad, source_ids, target_ids
from ..text.tokenizers import Tokenizer, build_tokenizers
from .loss import bleu_chrf, exact_match, is_finite, label_smoothed_loss, token_accuracy_counts
from .schedule import example_size, factor_for_peak, noam_lr, token_batches

# Fields that define the data, the tokenizers and the network: a resumed run takes them from the checkpoint.
RESUMED_FIELDS = ("task", "src_lang", "tgt_lang", "data", "task_options", "n_train", "n_valid", "n_test",
                  "tokenizer", "vocab_size", "separate_vocab", "d_model", "n_heads", "n_layers", "d_ff",
                  "dropout", "tie_embeddings", "norm_first", "max_len", "seed")


@dataclass
class TrainConfig:
    """Everything one training run needs; the defaults train ``numbers`` en->de well in two CPU minutes."""

    # data: a built-in task (data.make_task) or a file of pairs (data.load_pairs)
    task: str = "numbers"  # one of data.TASKS; ignored when ``data`` is given
    src_lang: str = "en"  # numbers: a NUMBER_LANGS code; dates: a Babel locale
    tgt_lang: str = "de"
    data: str | None = None  # a TSV/CSV file of (source, target) pairs instead of a task
    task_options: dict[str, Any] = field(default_factory=dict)  # e.g. {"max_number": 9999}
    n_train: int = 20000  # pairs generated for a built-in task
    n_valid: int = 500
    n_test: int = 1000
    # tokenizer
    tokenizer: str = "bpe"  # "bpe", "unigram" or "char"
    vocab_size: int = 160  # ignored by "char"
    separate_vocab: bool = False  # one tokenizer per side instead of one shared vocabulary
    # model (TransformerConfig)
    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 512
    dropout: float = 0.0  # the paper's 0.1 only slows down a two-minute run on generated data
    tie_embeddings: bool = True  # section 3.4; needs the shared vocabulary
    norm_first: bool = False
    max_len: int = 256
    # optimisation
    schedule: str = "noam"  # "noam" (warmup, then 1/sqrt(step)) or "constant"
    warmup: int = 100
    lr_factor: float = 0.3  # scales the noam curve (peak 2.7e-3 here); the paper: 1.0 with warmup 4000
    lr: float | None = None  # peak learning rate instead of lr_factor (constant schedule: the rate)
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0  # max gradient norm; None or 0 switches clipping off
    batch_tokens: int = 3000  # padded positions per (global) batch, the longer side counted
    max_steps: int | None = None  # stop after this many optimizer steps in total
    cooldown: int = 0  # the last this many of max_steps: the rate falls linearly towards 0 (steadies the end)
    max_seconds: float | None = 120.0  # stop after this many seconds of training (evaluations included)
    # evaluation and output
    eval_every: float = 30.0  # seconds between evaluations on the validation sentences
    eval_every_steps: int | None = None  # or every this many steps (takes precedence when set)
    eval_sentences: int = 200  # validation sentences per evaluation
    test_sentences: int | None = None  # test sentences at the end (None: the whole test split)
    log_every: int = 10  # steps between progress reports / log lines
    snapshots: bool = True  # keep weights at steps 0, 1, 2, 5, 10, 20, 50, ... for the app
    snapshot_dtype: str = "float32"  # "float16"/"bfloat16" halve each snapshot (loaded back as float32)
    max_snapshots: int | None = None  # at the end keep this many, spread on a log scale (first and last kept)
    save_optimizer: bool = True  # store Adam's moments so the run can be resumed
    out: str | None = None  # checkpoint folder (default runs/<task>-<src>-<tgt>)
    resume: str | None = None  # continue from this checkpoint folder
    # machine
    seed: int = 0
    device: str = "auto"  # "auto" (cuda if available), "cpu", "cuda", "cuda:1", ...
    amp: str = "auto"  # mixed precision on CUDA: "auto" (bf16 if supported, else fp16), "bf16", "fp16", "off"
    threads: int | None = None  # torch CPU threads (default: idle cores less one, per process, set
    # only when training on the main thread: the thread count is process-wide, and a run in a
    # background thread of the app would change it for every other session)

    def output_folder(self) -> Path:
        if self.out:
            return Path(self.out)
        if self.resume:
            return Path(self.resume)
        if self.data:
            return Path("runs") / Path(self.data).stem
        langs = f"-{self.src_lang}-{self.tgt_lang}" if self.task in ("numbers", "dates") else ""
        return Path("runs") / f"{self.task}{langs}"


@dataclass
class Progress:
    """What the callback receives every ``log_every`` steps and after each evaluation."""

    step: int
    elapsed: float  # seconds since training started
    lr: float
    loss: float | None  # mean train loss since the previous report
    tokens_per_second: float  # target tokens per second since the previous report
    epoch: int
    max_steps: int | None
    max_seconds: float | None
    phase: str = "train"  # "train", "eval" (metrics on validation), "test" (metrics on test), "done"
    # eval: val_loss, token_accuracy, exact_match, bleu, chrf; test and done: test_loss, test_exact_match, ...
    metrics: dict[str, float] | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class TrainResult:
    """What ``train`` returns; the same numbers are in the checkpoint's config.json meta."""

    out: Path
    step: int
    elapsed: float
    stop_reason: str  # "max_steps", "max_seconds" or "stopped"
    metrics: dict[str, dict[str, float]]  # {"valid": {...}, "test": {...}}
    parameters: int


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


Callback = Callable[[Progress], None]


# --- sequences and batches ---------------------------------------------------------------


@dataclass
class Examples:
    """One split, tokenized: ids for the model and the reference texts for scoring."""

    src: list[list[int]]
    tgt: list[list[int]]
    references: list[str]

    def sizes(self) -> list[int]:
        return [example_size(len(s), len(t) - 1) for s, t in zip(self.src, self.tgt, strict=True)]

    def take(self, n: int | None) -> Examples:
        return self if n is None else Examples(self.src[:n], self.tgt[:n], self.references[:n])


def encode_split(pairs: Sequence[tuple[str, str]], src_tok: Tokenizer, tgt_tok: Tokenizer) -> Examples:
    return Examples([source_ids(src_tok, s) for s, _ in pairs], [target_ids(tgt_tok, t) for _, t in pairs],
                    [t for _, t in pairs])


def is_snapshot_step(step: int) -> bool:
    """Steps 0, 1, 2, 5, 10, 20, 50, 100, ...: geometric spacing, ~3 per tenfold, dense where learning is fast."""
    if step == 0:
        return True
    while step % 10 == 0:
        step //= 10
    return step in (1, 2, 5)


# --- data and model ----------------------------------------------------------------------


def make_splits(cfg: TrainConfig) -> data_module.Splits:
    """The data the config names: a built-in task's splits, or a file split 90/5/5."""
    if cfg.data:
        pairs = data_module.load_pairs(cfg.data)
        return data_module.split_pairs(pairs, seed=cfg.seed)
    return data_module.make_task(cfg.task, n_train=cfg.n_train, n_valid=cfg.n_valid, n_test=cfg.n_test,
                                 seed=cfg.seed, src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, **cfg.task_options)


def model_config(cfg: TrainConfig, src_tok: Tokenizer, tgt_tok: Tokenizer) -> TransformerConfig:
    return TransformerConfig(
        src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, d_model=cfg.d_model,
        n_heads=cfg.n_heads, n_layers=cfg.n_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=cfg.max_len,
        pad_id=PAD_ID, norm_first=cfg.norm_first,
        tie_embeddings=cfg.tie_embeddings and src_tok is tgt_tok,
    )


def check_config(cfg: TrainConfig) -> None:
    """Raise ValueError for settings that cannot work, before any expensive step."""
    for name in ("n_train", "batch_tokens", "warmup", "log_every", "eval_sentences"):
        if getattr(cfg, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(cfg, name)}")
    for name in ("max_steps", "max_seconds", "eval_every_steps", "test_sentences", "threads"):
        value = getattr(cfg, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    if cfg.tokenizer not in ("bpe", "unigram", "char"):
        raise ValueError(f"unknown tokenizer {cfg.tokenizer!r}; valid choices: bpe, unigram, char")
    if cfg.schedule not in ("noam", "constant"):
        raise ValueError(f"unknown schedule {cfg.schedule!r}; valid choices: noam, constant")
    if cfg.cooldown < 0:
        raise ValueError(f"cooldown must be >= 0, got {cfg.cooldown}")
    if cfg.cooldown and (cfg.max_steps is None or cfg.cooldown > cfg.max_steps):
        raise ValueError("cooldown needs max_steps, at least as many steps as the cooldown")
    if cfg.snapshot_dtype not in ckpt.STORAGE_DTYPES:
        raise ValueError(f"unknown snapshot_dtype {cfg.snapshot_dtype!r}; valid choices: "
                         f"{', '.join(ckpt.STORAGE_DTYPES)}")
    if cfg.max_snapshots is not None and cfg.max_snapshots < 2:
        raise ValueError(f"max_snapshots must be at least 2 (the first and the last step), got {cfg.max_snapshots}")
    if cfg.amp not in ("auto", "bf16", "fp16", "off"):
        raise ValueError(f"unknown amp {cfg.amp!r}; valid choices: auto, bf16, fp16, off")
    if cfg.lr is not None and cfg.lr <= 0 or cfg.lr_factor <= 0:
        raise ValueError("the learning rate must be positive")
    if not 0 <= cfg.label_smoothing < 1:
        raise ValueError(f"label_smoothing must be in [0, 1), got {cfg.label_smoothing}")
    resolve_device(cfg.device)
    if cfg.resume:
        ckpt.read_config(cfg.resume)  # CheckpointError (a ValueError) when it is no checkpoint
        return
    if cfg.data:
        if not Path(cfg.data).is_file():
            raise ValueError(f"no data file at {cfg.data}")
        data_module.load_pairs(cfg.data)  # DataError (a ValueError) naming the bad line
    else:  # a tiny draw checks the task, its languages and options
        data_module.make_task(cfg.task, n_train=1, n_valid=0, n_test=0, seed=cfg.seed,
                              src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, **cfg.task_options)
    TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=cfg.d_model, n_heads=cfg.n_heads,
                      n_layers=cfg.n_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=cfg.max_len)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; try cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda, but CUDA is not available on this machine")
    return device


def default_threads(world_size: int = 1) -> int:
    """CPU threads for one process: the idle cores less one, shared among the processes.

    More threads than idle cores is far worse than too few: on a shared 2-core machine a
    step took 3-10x longer with 2 threads than with 1 as soon as anything else ran (the
    threads wait for each other), so one core is left as headroom.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    busy = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, (cores - round(busy) - 1) // world_size)


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype: mixed precision on CUDA only (CPU autocast does not pay off here)."""
    if device.type != "cuda" or amp == "off":
        return None
    if amp == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if amp == "bf16" else torch.float16


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """The rate for optimizer step ``step`` (1-based) under the config's schedule.

    With ``cooldown`` N (and ``max_steps``), the last N steps scale the rate that step
    ``max_steps - N`` had down linearly, to 1/(N+1) of it at the last step.
    """
    if cfg.cooldown and cfg.max_steps is not None and step > cfg.max_steps - cfg.cooldown:
        start = cfg.max_steps - cfg.cooldown
        return _scheduled_rate(cfg, max(start, 1)) * (cfg.max_steps + 1 - step) / (cfg.cooldown + 1)
    return _scheduled_rate(cfg, step)


def _scheduled_rate(cfg: TrainConfig, step: int) -> float:
    factor = cfg.lr_factor if cfg.lr is None else factor_for_peak(cfg.lr, cfg.d_model, cfg.warmup)
    if cfg.schedule == "constant":
        return cfg.lr if cfg.lr is not None else noam_lr(cfg.warmup, cfg.d_model, cfg.warmup, factor)
    return noam_lr(step, cfg.d_model, cfg.warmup, factor)


# --- evaluation ----------------------------------------------------------------------------


@torch.no_grad()
def evaluate(
    model: Transformer,
    examples: Examples,
    tgt_tok: Tokenizer,
    *,
    smoothing: float,
    max_output_len: int,
    batch_tokens: int,
    device: torch.device,
    stop_event: threading.Event | None = None,
) -> dict[str, float]:
    """Teacher-forced loss and token accuracy, then greedy outputs scored by exact match, BLEU, chrF.

    Returns {} when stopped before the end.
    """
    was_training = model.training
    model.eval()
    loss_sum, correct, total = 0.0, 0, 0
    hypotheses = [""] * len(examples.src)
    try:
        for batch in token_batches(examples.sizes(), batch_tokens, shuffle=False):
            if stop_event is not None and stop_event.is_set():
                return {}
            src = pad([examples.src[i] for i in batch], device)
            tgt = pad([examples.tgt[i] for i in batch], device)
            logits = model(src, tgt[:, :-1])
            loss_sum += float(label_smoothed_loss(logits, tgt[:, 1:], pad_id=PAD_ID, smoothing=smoothing,
                                                  reduction="sum"))
            c, t = token_accuracy_counts(logits, tgt[:, 1:], pad_id=PAD_ID)
            correct, total = correct + c, total + t
            decoded = greedy_decode(model, src, max_len=min(max_output_len, model.config.max_len))
            for i, tokens in zip(batch, decoded.tokens, strict=True):
                hypotheses[i] = tgt_tok.decode(tokens)
    finally:
        model.train(was_training)
    bleu, chrf = bleu_chrf(hypotheses, examples.references)
    return {"loss": loss_sum / max(total, 1), "token_accuracy": correct / max(total, 1),
            "exact_match": exact_match(hypotheses, examples.references), "bleu": bleu, "chrf": chrf}


# --- the training loop ---------------------------------------------------------------------


@dataclass
class _Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _setup_distributed() -> _Distributed:
    """Join the process group when launched by torchrun (RANK / WORLD_SIZE in the environment)."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return _Distributed()
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return _Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")))


def train(
    args: TrainConfig, *, callback: Callback | None = None, stop_event: threading.Event | None = None
) -> TrainResult:
    """Train a model as ``args`` says, write the checkpoint folder, and return the metrics.

    ``callback(Progress)`` is called every ``log_every`` steps and after each evaluation;
    setting ``stop_event`` ends the run within a second (the model so far is saved, the
    final test evaluation skipped). A NaN or infinite loss raises ``TrainingDiverged``
    and leaves the last good checkpoint in place.
    """
    return _Run(args, callback, stop_event).run()


class _Run:
    """One run's state: set up once from the config (or a checkpoint), then advanced step by step."""

    def __init__(self, args: TrainConfig, callback: Callback | None, stop_event: threading.Event | None) -> None:
        cfg = dataclasses.replace(args, task_options=dict(args.task_options))
        check_config(cfg)
        self.callback, self.stop_event = callback, stop_event
        self.dist = _setup_distributed()
        self.device = resolve_device(cfg.device)
        if self.device.type == "cuda" and self.dist.world_size > 1:
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        if self.device.type == "cpu":
            if cfg.threads is not None:
                torch.set_num_threads(cfg.threads)
            elif threading.current_thread() is threading.main_thread():
                torch.set_num_threads(default_threads(self.dist.world_size))
            # else: a run in a background thread (the app's) leaves the process-wide count alone

        resumed: ckpt.Checkpoint | None = None
        self.step = self.epoch = self.batch_in_epoch = 0  # where in the (seeded) batch sequence we are
        if cfg.resume:  # data, tokenizers and network from the checkpoint; budgets from args
            resumed = ckpt.load_checkpoint(cfg.resume)
            saved = resumed.meta.get("train_args", {})
            cfg = dataclasses.replace(cfg, **{k: saved[k] for k in RESUMED_FIELDS if k in saved})
            self.step, self.epoch, self.batch_in_epoch = (
                int(resumed.meta.get(k, 0)) for k in ("step", "epoch", "batch_in_epoch"))
        self.cfg = cfg
        self.out = cfg.output_folder()
        self._prepare_data(resumed)
        self._prepare_model(resumed)
        self.lr = learning_rate(cfg, max(self.step, 1))
        self.metrics: dict[str, dict[str, float]] = dict(resumed.meta.get("metrics", {})) if resumed else {}
        self.base_meta = {
            "task": "custom" if cfg.data else cfg.task,
            "task_options": cfg.task_options,
            "src_lang": cfg.src_lang,
            "tgt_lang": cfg.tgt_lang,
            "train_args": dataclasses.asdict(cfg),
            "parameters": self.model.num_parameters(),
            "sequence_format": {"src": "tokens + </s>", "tgt": "<s> + tokens + </s>"},
            "max_output_len": self.max_output_len,
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            "world_size": self.dist.world_size,
        }
        if self.dist.is_main:
            _prepare_out(self.out, resumed)
        self.started = time.monotonic()

    def _prepare_data(self, resumed: ckpt.Checkpoint | None) -> None:
        cfg = self.cfg
        splits = make_splits(cfg)
        if resumed is not None:
            self.src_tok, self.tgt_tok = resumed.src_tokenizer, resumed.tgt_tokenizer
        else:
            self.src_tok, self.tgt_tok = build_tokenizers(splits, kind=cfg.tokenizer, vocab_size=cfg.vocab_size,
                                                          shared=not cfg.separate_vocab, seed=cfg.seed)
        self.train_set = encode_split(splits.train, self.src_tok, self.tgt_tok)
        self.valid_set = encode_split(splits.valid, self.src_tok, self.tgt_tok).take(cfg.eval_sentences)
        self.test_set = encode_split(splits.test, self.src_tok, self.tgt_tok).take(cfg.test_sentences)
        longest_target = max(len(t) for t in self.train_set.tgt)
        self.max_output_len = min(cfg.max_len, longest_target + 10)  # a cap for greedy decoding

    def _prepare_model(self, resumed: ckpt.Checkpoint | None) -> None:
        cfg = self.cfg
        torch.manual_seed(cfg.seed + self.step)  # a resumed run draws fresh dropout masks
        self.model = resumed.model if resumed else Transformer(model_config(cfg, self.src_tok, self.tgt_tok))
        longest = max(max(map(len, self.train_set.src)), max(map(len, self.train_set.tgt)))
        if longest > self.model.config.max_len:
            raise ValueError(f"a training example has {longest} tokens, more than max_len={self.model.config.max_len}")
        self.model.to(self.device).train()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=learning_rate(cfg, 1), betas=(0.9, 0.98),
                                          eps=1e-9)
        if resumed is not None:
            ckpt.load_optimizer_state(resumed.folder, self.optimizer)
        self.net: torch.nn.Module = self.model
        if self.dist.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            device_ids = [self.device.index] if self.device.type == "cuda" else None
            self.net = DistributedDataParallel(self.model, device_ids=device_ids)
        self.autocast_dtype = amp_dtype(cfg.amp, self.device)
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.autocast_dtype == torch.float16)

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> TrainResult:
        cfg, main_process = self.cfg, self.dist.is_main
        if main_process:
            if cfg.snapshots and self.step == 0:
                self.snapshot()
            self.save()  # from here on there is always a good checkpoint to fall back to
        stop_reason = ""
        last_eval = last_report = self.started
        window_loss, window_tokens, window_steps = 0.0, 0, 0
        while not stop_reason:
            batches = token_batches(self.train_set.sizes(), cfg.batch_tokens, seed=cfg.seed, epoch=self.epoch)
            if self.dist.world_size > 1:  # every process needs a non-empty shard
                batches = [b for b in batches if len(b) >= self.dist.world_size]
            while self.batch_in_epoch < len(batches) and not stop_reason:
                batch = batches[self.batch_in_epoch]
                self.batch_in_epoch += 1
                self.step += 1
                loss, n_tokens, wants_stop = self.train_step(batch)
                window_loss += loss
                window_tokens += n_tokens
                window_steps += 1
                if main_process and cfg.snapshots and is_snapshot_step(self.step):
                    self.snapshot()
                if wants_stop:
                    stopped = self.stop_event is not None and self.stop_event.is_set()
                    stop_reason = "stopped" if stopped else "max_seconds"
                elif cfg.max_steps is not None and self.step >= cfg.max_steps:
                    stop_reason = "max_steps"

                now = time.monotonic()
                if self.step % cfg.log_every == 0 or stop_reason:
                    speed = window_tokens / max(now - last_report, 1e-9)
                    self.report(self.progress(loss=window_loss / window_steps, tokens_per_second=speed))
                    window_loss, window_tokens, window_steps, last_report = 0.0, 0, 0, now
                due = (self.step % cfg.eval_every_steps == 0) if cfg.eval_every_steps else \
                    now - last_eval >= cfg.eval_every
                if due and not stop_reason and main_process:
                    self.evaluate("valid")
                    last_eval = time.monotonic()
                    self.save()
            if not stop_reason:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        return self.finish(stop_reason)

    def train_step(self, batch: list[int]) -> tuple[float, int, bool]:
        """One optimizer step on a global batch: (its mean loss, its target tokens, whether to stop)."""
        cfg, dist_info = self.cfg, self.dist
        self.lr = learning_rate(cfg, self.step)
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr
        shard = batch[dist_info.rank :: dist_info.world_size]
        n_tokens = sum(len(self.train_set.tgt[i]) - 1 for i in batch)  # non-pad targets in the global batch
        src = pad([self.train_set.src[i] for i in shard], self.device)
        tgt = pad([self.train_set.tgt[i] for i in shard], self.device)
        with torch.autocast(self.device.type, dtype=self.autocast_dtype) if self.autocast_dtype else nullcontext():
            logits = self.net(src, tgt[:, :-1])  # teacher forcing: predict tgt[1:] from tgt[:-1]
        loss_sum = label_smoothed_loss(logits, tgt[:, 1:], pad_id=PAD_ID, smoothing=cfg.label_smoothing,
                                       reduction="sum")
        # DDP averages gradients over processes; scaling by world_size / global tokens makes
        # that average the gradient of the mean loss over the whole global batch.
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss_sum * (dist_info.world_size / n_tokens)).backward()

        # One all-reduce shares the loss and any process's wish to stop, so all stop together.
        wants_stop = (self.stop_event is not None and self.stop_event.is_set()) or \
            (cfg.max_seconds is not None and self.elapsed() >= cfg.max_seconds)
        shared = torch.tensor([loss_sum.detach().float().item(), float(wants_stop)], dtype=torch.float64)
        if dist_info.world_size > 1:
            import torch.distributed as dist

            dist.all_reduce(shared)
        loss = shared[0].item() / n_tokens
        if not is_finite(loss):
            self.report(self.progress(loss=loss))
            raise TrainingDiverged(
                f"the training loss became {loss} at step {self.step}; stopped. The last good checkpoint "
                f"is in {self.out} (step {_saved_step(self.out)}). Try a lower learning rate (--lr-factor), "
                "a longer warmup or gradient clipping.")
        if cfg.clip_norm:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss, n_tokens, shared[1].item() > 0

    def finish(self, stop_reason: str) -> TrainResult:
        """After the last step: a final snapshot, validation and test scores (unless stopped), the checkpoint."""
        elapsed = self.elapsed()
        result = TrainResult(self.out, self.step, elapsed, stop_reason, self.metrics, self.model.num_parameters())
        if not self.dist.is_main:
            return result
        if self.cfg.snapshots and not is_snapshot_step(self.step):
            self.snapshot()
        if self.cfg.max_snapshots:
            ckpt.prune_snapshots(self.out, self.cfg.max_snapshots)
        if stop_reason != "stopped":
            self.evaluate("valid")
            self.evaluate("test")
        self.save(elapsed)
        if self.callback is not None:
            self.callback(self.progress(phase="done", metrics=_prefixed(self.metrics.get("test", {}), "test_")))
        return result

    # -- evaluation, saving, reporting ---------------------------------------------------------

    def evaluate(self, split: str) -> None:
        examples = self.valid_set if split == "valid" else self.test_set
        result = evaluate(self.model, examples, self.tgt_tok, smoothing=self.cfg.label_smoothing,
                          max_output_len=self.max_output_len, batch_tokens=self.cfg.batch_tokens * 2,
                          device=self.device, stop_event=self.stop_event)
        if result:  # {} when stopped half-way
            self.metrics[split] = result
            phase, prefix = ("eval", "val_") if split == "valid" else ("test", "test_")
            self.report(self.progress(phase=phase, metrics=_prefixed(result, prefix)))

    def snapshot(self) -> None:
        ckpt.save_snapshot(self.out, self.model, self.step, dtype=self.cfg.snapshot_dtype)

    def save(self, elapsed: float | None = None) -> None:
        meta = {**self.base_meta, "step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "elapsed_seconds": round(self.elapsed() if elapsed is None else elapsed, 3), "metrics": self.metrics}
        ckpt.save_checkpoint(self.out, self.model, self.src_tok, self.tgt_tok, meta,
                             optimizer=self.optimizer if self.cfg.save_optimizer else None)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def progress(self, *, loss: float | None = None, tokens_per_second: float = 0.0, phase: str = "train",
                 metrics: dict[str, float] | None = None) -> Progress:
        return Progress(self.step, self.elapsed(), self.lr, loss, tokens_per_second, self.epoch,
                        self.cfg.max_steps, self.cfg.max_seconds, phase, metrics)

    def report(self, progress: Progress) -> None:
        """One line in train_log.jsonl and one callback, from the main process only."""
        if not self.dist.is_main:
            return
        record = {k: v for k, v in progress.as_dict().items() if k not in ("max_steps", "max_seconds", "metrics")}
        record.update(progress.metrics or {})
        ckpt.append_log(self.out, record)
        if self.callback is not None:
            self.callback(progress)


def _prefixed(result: dict[str, float], prefix: str) -> dict[str, float]:
    """Progress metric names: "val_loss" and the bare accuracy/BLEU/chrF names for validation
    (what the app's curves plot), "test_*" for the test split."""
    if prefix == "val_":
        return {("val_loss" if k == "loss" else k): v for k, v in result.items()}
    return {prefix + k: v for k, v in result.items()}


def _prepare_out(out: Path, resumed: ckpt.Checkpoint | None) -> None:
    """A fresh run replaces an earlier checkpoint in ``out``; a resumed one carries its log and snapshots over."""
    out.mkdir(parents=True, exist_ok=True)
    if resumed is not None:
        if resumed.folder.resolve() != out.resolve():
            for name in (ckpt.LOG_FILE, ckpt.SNAPSHOT_DIR):
                source = resumed.folder / name
                if source.is_dir():
                    shutil.copytree(source, out / name, dirs_exist_ok=True)
                elif source.is_file():
                    shutil.copy2(source, out / name)
        return
    for name in (ckpt.LOG_FILE, ckpt.CONFIG_FILE, ckpt.WEIGHTS_FILE, ckpt.OPTIMIZER_FILE):
        (out / name).unlink(missing_ok=True)
    for step in ckpt.list_snapshots(out):
        (out / ckpt.SNAPSHOT_DIR / f"step_{step:07d}.safetensors").unlink()


def _saved_step(out: Path) -> int | str:
    try:
        return ckpt.read_config(out)[1].get("step", "?")
    except ckpt.CheckpointError:
        return "none"


# --- command line --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    d = TrainConfig()
    p = argparse.ArgumentParser(prog="python -m transformer.train", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    g = p.add_argument_group("data")
    g.add_argument("--task", default=d.task, choices=data_module.TASKS)
    g.add_argument("--src-lang", default=d.src_lang)
    g.add_argument("--tgt-lang", default=d.tgt_lang)
    g.add_argument("--data", help="a TSV/CSV file of source/target pairs (instead of --task)")
    g.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a data.make_task option, e.g. max_number=9999 (repeatable)")
    g.add_argument("--n-train", type=int, default=d.n_train)
    g = p.add_argument_group("tokenizer")
    g.add_argument("--tokenizer", default=d.tokenizer, choices=("bpe", "unigram", "char"))
    g.add_argument("--vocab-size", type=int, default=d.vocab_size)
    g.add_argument("--separate-vocab", action="store_true", help="one vocabulary per side")
    g = p.add_argument_group("model")
    for name in ("d_model", "n_heads", "n_layers", "d_ff", "max_len"):
        g.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    g.add_argument("--dropout", type=float, default=d.dropout)
    g.add_argument("--no-tie", dest="tie_embeddings", action="store_false", help="separate embedding matrices")
    g.add_argument("--pre-ln", dest="norm_first", action="store_true", help="LayerNorm before each sub-layer")
    g = p.add_argument_group("optimisation")
    g.add_argument("--schedule", default=d.schedule, choices=("noam", "constant"))
    g.add_argument("--warmup", type=int, default=d.warmup)
    g.add_argument("--lr-factor", type=float, default=d.lr_factor)
    g.add_argument("--lr", type=float, help="peak learning rate (overrides --lr-factor)")
    g.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    g.add_argument("--clip-norm", type=float, default=d.clip_norm, help="0 switches clipping off")
    g.add_argument("--batch-tokens", type=int, default=d.batch_tokens)
    g.add_argument("--max-steps", type=int)
    g.add_argument("--cooldown", type=int, default=d.cooldown, metavar="N",
                   help="the last N of --max-steps: the learning rate falls linearly towards 0")
    g.add_argument("--max-seconds", type=float, default=d.max_seconds)
    g = p.add_argument_group("evaluation and output")
    g.add_argument("--eval-every", type=float, default=d.eval_every, help="seconds between evaluations")
    g.add_argument("--eval-every-steps", type=int)
    g.add_argument("--eval-sentences", type=int, default=d.eval_sentences)
    g.add_argument("--log-every", type=int, default=d.log_every)
    g.add_argument("--no-snapshots", dest="snapshots", action="store_false")
    g.add_argument("--snapshot-dtype", default=d.snapshot_dtype, choices=tuple(ckpt.STORAGE_DTYPES),
                   help="float16 halves each snapshot; loaded back as float32")
    g.add_argument("--max-snapshots", type=int, metavar="N",
                   help="at the end keep N snapshots, spread on a log scale (step 0 and the last kept)")
    g.add_argument("--no-optimizer-state", dest="save_optimizer", action="store_false",
                   help="do not store Adam's moments (smaller folder, cannot be resumed exactly)")
    g.add_argument("--out", help="checkpoint folder (default runs/<task>-<src>-<tgt>)")
    g.add_argument("--resume", metavar="DIR", help="continue training the checkpoint in DIR")
    g = p.add_argument_group("machine")
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument("--device", default=d.device)
    g.add_argument("--amp", default=d.amp, choices=("auto", "bf16", "fp16", "off"))
    g.add_argument("--threads", type=int)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def config_from_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> tuple[TrainConfig, bool]:
    """Parse and check the command line; any problem ends with a usage message and exit code 2."""
    ns = vars(parser.parse_args(argv))
    quiet = ns.pop("quiet")
    options = {}
    for item in ns.pop("task_option"):
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--task-option expects KEY=VALUE, got {item!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    cfg = TrainConfig(**ns, task_options=options)
    try:
        check_config(cfg)
    except ValueError as error:  # includes DataError and CheckpointError
        parser.error(str(error))
    return cfg, quiet


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    cfg, quiet = config_from_args(parser, argv)
    is_main = int(os.environ.get("RANK", "0")) == 0
    bar = None
    if not quiet and is_main:
        from tqdm import tqdm

        total = cfg.max_steps if cfg.max_steps else cfg.max_seconds
        bar = tqdm(total=total, unit="step" if cfg.max_steps else "s", dynamic_ncols=True,
                   bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} {unit} [{elapsed}<{remaining}{postfix}]")

    def show(progress: Progress) -> None:
        if bar is None:
            return
        if progress.phase == "train":
            bar.n = min(progress.step if cfg.max_steps else progress.elapsed, bar.total or math.inf)
            bar.set_postfix(step=progress.step, loss=f"{progress.loss:.3f}", lr=f"{progress.lr:.2e}", refresh=False)
            bar.refresh()
        elif progress.phase in ("eval", "test") and progress.metrics:
            shown = {k: round(v, 3) for k, v in progress.metrics.items()}
            bar.write(f"step {progress.step} {progress.phase}: {shown}")

    try:
        result = train(cfg, callback=show)
    except TrainingDiverged as error:
        if bar is not None:
            bar.close()
        print(f"error: {error}", file=sys.stderr)
        return 1
    if bar is not None:
        bar.close()
    if is_main:
        test = result.metrics.get("test", {})
        summary = ", ".join(f"{k} {v:.4g}" for k, v in test.items())
        print(f"{result.step} steps in {result.elapsed:.1f} s ({result.stop_reason}); "
              f"{result.parameters:,} parameters; test: {summary or 'not evaluated'}; saved to {result.out}")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    return 0

