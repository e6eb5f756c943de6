"""The training loop: set a run up from its config (or a checkpoint), step it, snapshot, evaluate and save.

The paper's recipe (section 5), every part switchable in ``TrainConfig``:

- Optimizer: Adam with beta_1 = 0.9, beta_2 = 0.98, eps = 1e-9 (section 5.3).
- Learning rate: ``schedule.learning_rate``, warmup then 1/sqrt(step) decay (or constant: ``schedule="constant"``),
  optionally a linear cooldown over the last steps of a ``max_steps`` run (``cooldown``) or over the
  last share of a ``max_seconds`` run (``cooldown_share``).
- Regularisation: dropout (``TransformerConfig.dropout``), label smoothing (``loss.py``), gradient clipping.
- Batches: examples of similar length under a token budget (``batching.token_batches``).
- Architecture: the paper's encoder-decoder, or a decoder-only model reading ``source + [SEP] + target + [EOS]``
  and learning only the target and EOS (``architecture="decoder"``; ``batching.batch_tensors``).
- Evaluation: validation loss, token accuracy, exact match of greedy outputs, BLEU and chrF
  (``evaluation.evaluate``), every ``eval_every`` seconds on a few hundred sentences, and on the
  test split at the end.
- Data parallel: under ``torchrun`` every process takes a shard of each global batch
  (DistributedDataParallel, NCCL on GPUs, gloo on CPU; ``runtime.py``); only rank 0 writes.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import torch

from ..checkpoints import checkpoint as ckpt
from ..network.model import Transformer
from ..text.tokenizers import build_tokenizers
from .batching import batch_tensors, encode_split, token_batches
from .config import (
    RESUMED_FIELDS,
    Callback,
    Progress,
    TrainConfig,
    TrainingDiverged,
    TrainResult,
    check_config,
    make_splits,
    model_config,
)
from .dropout import use_dropout_generator
from .evaluation import evaluate
from .loss import is_finite, label_smoothed_loss
from .runtime import amp_dtype, configure_threads, resolve_device, setup_distributed
from .schedule import in_time_cooldown, learning_rate


def is_snapshot_step(step: int) -> bool:
    """Steps 0, 1, 2, 5, 10, 20, 50, 100, ...: geometric spacing, ~3 per tenfold, dense where learning is fast."""
    if step == 0:
        return True
    while step % 10 == 0:
        step //= 10
    return step in (1, 2, 5)


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
        self.device = resolve_device(cfg.device)
        self.dist = setup_distributed(self.device.type)
        if self.device.type == "cuda" and self.dist.world_size > 1:
            self.device = torch.device("cuda", self.dist.local_rank)
            torch.cuda.set_device(self.device)
        configure_threads(cfg.threads, self.device, self.dist.world_size)  # not from the app's background thread

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
            "architecture": cfg.architecture,
            "sequence_format": ({"lm": "source tokens + <s> + target tokens + </s>", "separator": "<s>",
                                 "loss": "target tokens + </s>"} if self.decoder_only else
                                {"src": "tokens + </s>", "tgt": "<s> + tokens + </s>"}),
            "max_output_len": self.max_output_len,
            "longest_source": self.longest_source,
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            "world_size": self.dist.world_size,
        }
        if self.dist.is_main:
            _prepare_out(self.out, resumed)
        self.started = time.monotonic()
        self.cooldown_start: int | None = None  # the step at which a time-bounded run began its cooldown

    def _prepare_data(self, resumed: ckpt.Checkpoint | None) -> None:
        cfg = self.cfg
        splits = make_splits(cfg)
        if resumed is not None:
            self.src_tok, self.tgt_tok = resumed.src_tokenizer, resumed.tgt_tokenizer
            if cfg.architecture == "decoder":  # the one joint vocabulary, saved as src and tgt
                self.src_tok = self.tgt_tok
        else:
            self.src_tok, self.tgt_tok = build_tokenizers(splits, kind=cfg.tokenizer, vocab_size=cfg.vocab_size,
                                                          shared=not cfg.separate_vocab, seed=cfg.seed)
        self.decoder_only = cfg.architecture == "decoder"
        encode = partial(encode_split, src_tok=self.src_tok, tgt_tok=self.tgt_tok, decoder_only=self.decoder_only)
        self.train_set = encode(splits.train)
        self.valid_set = encode(splits.valid).take(cfg.eval_sentences)
        self.test_set = encode(splits.test).take(cfg.test_sentences)
        longest_target = max(len(t) for t in self.train_set.tgt)
        # tokens + EOS (decoder-only: + SEP): inputs past it are warned of
        self.longest_source = max(len(s) for s in self.train_set.src)
        self.max_output_len = min(cfg.max_len, longest_target + 10)  # a cap for greedy decoding

    def _prepare_model(self, resumed: ckpt.Checkpoint | None) -> None:
        cfg = self.cfg
        if resumed:
            self.model = resumed.model
        else:  # built on the meta device, then initialised from the run's own generator: the global one is
            # shared by every session of the app and is never reseeded or drawn from here
            with torch.device("meta"):
                self.model = Transformer(model_config(cfg, self.src_tok, self.tgt_tok))
            self.model.to_empty(device="cpu")
            self.model.tie_weights()
            self.model.reset_parameters(torch.Generator().manual_seed(cfg.seed))
        pairs = zip(self.train_set.src, self.train_set.tgt, strict=True)  # the longer side, or the whole sequence
        longest = max(len(s) + len(t) - 1 if self.decoder_only else max(len(s), len(t)) for s, t in pairs)
        if longest > self.model.config.max_len:
            raise ValueError(f"a training example has {longest} tokens, more than max_len={self.model.config.max_len}")
        self.model.to(self.device).train()
        # Dropout masks from a generator of the run's own too: one stream per process (DDP ranks drop
        # differently), restarted from the step when a run is resumed (deterministic, though not the
        # stream an uninterrupted run would have drawn).
        dropout_seed = (cfg.seed * 1_000_003 + self.step) * 1_009 + self.dist.rank
        use_dropout_generator(self.model, torch.Generator(device=self.device).manual_seed(dropout_seed))
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
            batches = token_batches(self.train_set.sizes(), cfg.batch_tokens, seed=cfg.seed, epoch=self.epoch,
                                    max_sentences=cfg.batch_sentences)
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
                due = (self.step % cfg.eval_every_steps == 0) if cfg.eval_every_steps else \
                    now - last_eval >= cfg.eval_every
                evaluating = due and not stop_reason and main_process
                # a report right before each evaluation too: the log then times every evaluation, which
                # compare.time_in_log leaves out of a run's training seconds
                if self.step % cfg.log_every == 0 or stop_reason or evaluating:
                    speed = window_tokens / max(now - last_report, 1e-9)
                    self.report(self.progress(loss=window_loss / window_steps, tokens_per_second=speed))
                    window_loss, window_tokens, window_steps, last_report = 0.0, 0, 0, now
                if evaluating:
                    self.evaluate("valid")
                    last_eval = time.monotonic()
                    self.save()
            if not stop_reason:
                self.epoch, self.batch_in_epoch = self.epoch + 1, 0
        return self.finish(stop_reason)

    def train_step(self, batch: list[int]) -> tuple[float, int, bool]:
        """One optimizer step on a global batch: (its mean loss, its target tokens, whether to stop)."""
        cfg, dist_info = self.cfg, self.dist
        elapsed = self.elapsed()
        if self.cooldown_start is None and in_time_cooldown(cfg, elapsed):
            self.cooldown_start = max(self.step, 1)
        self.lr = learning_rate(cfg, self.step, elapsed, self.cooldown_start)
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr
        shard = batch[dist_info.rank :: dist_info.world_size]
        n_tokens = sum(len(self.train_set.tgt[i]) - 1 for i in batch)  # non-pad targets in the global batch
        pad_id = self.model.config.pad_id
        src, inputs, labels = batch_tensors(self.train_set, shard, self.device, pad_id)
        with torch.autocast(self.device.type, dtype=self.autocast_dtype) if self.autocast_dtype else nullcontext():
            logits = self.net(src, inputs)  # teacher forcing: predict the labels (tgt[1:]) from tgt[:-1]
        loss_sum = label_smoothed_loss(logits, labels, pad_id=pad_id, smoothing=cfg.label_smoothing,
                                       reduction="sum")
        # DDP averages gradients over processes; scaling by world_size / global tokens makes
        # that average the gradient of the mean loss over the whole global batch.
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss_sum * (dist_info.world_size / n_tokens)).backward()

        # One all-reduce shares the loss and any process's wish to stop, so all stop together.
        wants_stop = (self.stop_event is not None and self.stop_event.is_set()) or \
            (cfg.max_seconds is not None and self.elapsed() >= cfg.max_seconds)
        # On the training device: NCCL (CUDA) all-reduces device tensors only; gloo (CPU) takes these too.
        shared = torch.tensor([loss_sum.detach().float().item(), float(wants_stop)], dtype=torch.float64,
                              device=self.device)
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
