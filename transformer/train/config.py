"""What a training run is told and what it reports: its config, checks, data, model size and progress records."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoints import checkpoint as ckpt
from ..checks import check_choice
from ..network.config import TransformerConfig
from ..text import pairs as pair_files
from ..text import tasks as data_module
from ..text.tokenizers import KINDS as TOKENIZER_KINDS
from ..text.tokenizers import Tokenizer
from .runtime import resolve_device

SCHEDULES = ("noam", "constant")
# "encoder-decoder": the paper's two stacks; "decoder": one stack reading source + <s> + target (text.ids.lm_sequence)
ARCHITECTURES = ("encoder-decoder", "decoder")
POSITIONS = ("interleaved", "learned")  # section 3.5: the sinusoid, or a learned table ("nearly identical results")
AMP_MODES = ("auto", "bf16", "fp16", "off")

# Fields that define the data, the tokenizers and the network: a resumed run takes them from the checkpoint.
RESUMED_FIELDS = ("task", "src_lang", "tgt_lang", "data", "task_options", "n_train", "n_valid", "n_test",
                  "tokenizer", "vocab_size", "separate_vocab", "architecture", "positional", "d_model", "n_heads",
                  "n_layers", "d_ff", "dropout", "tie_embeddings", "norm_first", "max_len", "seed")


@dataclass
class TrainConfig:
    """Everything one training run needs; the defaults train ``numbers`` en->de well in two CPU minutes."""

    # data: a built-in task (text.tasks.make_task) or a file of pairs (text.tasks.load_pairs)
    task: str = "numbers"  # one of text.tasks.TASKS; ignored when ``data`` is given
    src_lang: str = "en"  # numbers: a NUMBER_LANGS code; dates: a Babel locale
    tgt_lang: str = "de"
    data: str | None = None  # a TSV/CSV file of (source, target) pairs instead of a task
    task_options: dict[str, Any] = field(default_factory=dict)  # e.g. {"max_number": 9999}
    n_train: int = 20000  # pairs generated for a built-in task
    n_valid: int = 500
    n_test: int = 1000
    # tokenizer
    tokenizer: str = "bpe"  # "bpe", "unigram" or "char"
    vocab_size: int = 240  # ignored by "char"; 160 left "null" in single letters, and 2-minute runs wrote "nul"
    separate_vocab: bool = False  # one tokenizer per side instead of one shared vocabulary
    # model (TransformerConfig)
    architecture: str = "encoder-decoder"  # ARCHITECTURES; "decoder" learns only the target of each sequence
    positional: str = "interleaved"  # POSITIONS: the paper's sinusoid or a learned table
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
    batch_sentences: int | None = 64  # and at most this many examples per batch (None: no cap)
    max_steps: int | None = None  # stop after this many optimizer steps in total
    cooldown: int = 0  # the last this many of max_steps: the rate falls linearly towards 0 (steadies the end)
    cooldown_share: float = 0.3  # without a step cooldown: the last this share of max_seconds cools down the same way
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
    overwrite: bool = False  # replace a checkpoint already in ``out`` (otherwise a run there is refused)
    # machine
    seed: int = 0
    device: str = "auto"  # "auto" (cuda if available), "cpu", "cuda", "cuda:1", ...
    amp: str = "auto"  # mixed precision on CUDA: "auto" (bf16 if supported, else fp16), "bf16", "fp16", "off"
    threads: int | None = None  # torch CPU threads (default: idle cores less one, per process, set
    # only when training on the main thread: the thread count is process-wide, and a run in a
    # background thread of the app would change it for every other session)

    @classmethod
    def from_saved(cls, train_args: dict[str, Any]) -> TrainConfig:
        """The config a checkpoint's ``meta["train_args"]`` records (keys this version does not know are left out),
        e.g. to draw a shipped model's own test split again with ``make_splits``."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in train_args.items() if k in fields})

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


# --- what the config names -----------------------------------------------------------------


def make_splits(cfg: TrainConfig) -> pair_files.Splits:
    """The data the config names: a built-in task's splits, or a file split 90/5/5."""
    if cfg.data:
        pairs = pair_files.load_pairs(cfg.data)
        return pair_files.split_pairs(pairs, seed=cfg.seed)
    return data_module.make_task(cfg.task, n_train=cfg.n_train, n_valid=cfg.n_valid, n_test=cfg.n_test,
                                 seed=cfg.seed, src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, **cfg.task_options)


def model_config(cfg: TrainConfig, src_tok: Tokenizer, tgt_tok: Tokenizer) -> TransformerConfig:
    """The network the config asks for, sized to the tokenizers' vocabularies (tied only when they are one).
    A decoder-only model reads the one joint vocabulary; tied, its generator is its embedding (as GPT-2's)."""
    decoder_only = cfg.architecture == "decoder"
    tied = cfg.tie_embeddings and src_tok is tgt_tok
    return TransformerConfig(
        src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, d_model=cfg.d_model,
        n_heads=cfg.n_heads, n_layers=cfg.n_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=cfg.max_len,
        pad_id=tgt_tok.pad_id, unk_id=tgt_tok.unk_id, bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id,
        norm_first=cfg.norm_first, decoder_only=decoder_only, positional=cfg.positional,
        tying="none" if not tied else "generator" if decoder_only else "all",
    )


def check_config(cfg: TrainConfig) -> None:
    """Raise ValueError for settings that cannot work, before any expensive step."""
    for name in ("n_train", "batch_tokens", "warmup", "log_every", "eval_sentences"):
        if getattr(cfg, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(cfg, name)}")
    for name in ("max_steps", "max_seconds", "eval_every_steps", "test_sentences", "threads", "batch_sentences"):
        value = getattr(cfg, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, got {value}")
    check_choice("tokenizer", cfg.tokenizer, TOKENIZER_KINDS)
    check_choice("schedule", cfg.schedule, SCHEDULES)
    check_choice("architecture", cfg.architecture, ARCHITECTURES)
    check_choice("positional", cfg.positional, POSITIONS)
    if cfg.architecture == "decoder" and cfg.separate_vocab and not cfg.resume:
        raise ValueError("a decoder-only model reads source and target as one sequence in one joint vocabulary: "
                         "drop --separate-vocab")
    if cfg.cooldown < 0:
        raise ValueError(f"cooldown must be >= 0, got {cfg.cooldown}")
    if not 0 <= cfg.cooldown_share < 1:
        raise ValueError(f"cooldown_share must be in [0, 1), got {cfg.cooldown_share}")
    if cfg.cooldown and (cfg.max_steps is None or cfg.cooldown > cfg.max_steps):
        raise ValueError("cooldown needs max_steps, at least as many steps as the cooldown")
    check_choice("snapshot_dtype", cfg.snapshot_dtype, ckpt.STORAGE_DTYPES)
    if cfg.max_snapshots is not None and cfg.max_snapshots < 2:
        raise ValueError(f"max_snapshots must be at least 2 (the first and the last step), got {cfg.max_snapshots}")
    check_choice("amp", cfg.amp, AMP_MODES)
    if cfg.lr is not None and cfg.lr <= 0 or cfg.lr_factor <= 0:
        raise ValueError("the learning rate must be positive")
    if not 0 <= cfg.label_smoothing < 1:
        raise ValueError(f"label_smoothing must be in [0, 1), got {cfg.label_smoothing}")
    resolve_device(cfg.device)
    out = cfg.output_folder()
    if not cfg.resume and not cfg.overwrite and any((out / name).exists() for name in (ckpt.CONFIG_FILE,
                                                                                        ckpt.WEIGHTS_FILE)):
        raise ValueError(f"{out} already holds a checkpoint: give --overwrite to replace it, --resume {out} to "
                         "continue training it, or another --out")
    if cfg.resume:
        ckpt.read_config(cfg.resume)  # CheckpointError (a ValueError) when it is no checkpoint
        return
    if cfg.data:
        if not Path(cfg.data).is_file():
            raise ValueError(f"no data file at {cfg.data}")
        pair_files.load_pairs(cfg.data)  # DataError (a ValueError) naming the bad line
    else:  # a tiny draw checks the task, its languages and options
        data_module.make_task(cfg.task, n_train=1, n_valid=0, n_test=0, seed=cfg.seed,
                              src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang, **cfg.task_options)
    TransformerConfig(src_vocab_size=8, tgt_vocab_size=8, d_model=cfg.d_model, n_heads=cfg.n_heads,
                      n_layers=cfg.n_layers, d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=cfg.max_len,
                      decoder_only=cfg.architecture == "decoder", positional=cfg.positional)

