"""The Training page's default run per built-in task, and what that run reaches (measured).

The defaults follow the shipped models' recipes (pretrained/*/config.json): pre-LN and
d_model 64 for the string tasks (the shipped reverse model's recipe) and for sentences, which
a post-LN d_model-128 model barely starts in a minute (1% exact vs 16.5%, one run each). The
promise shown on the page comes from ``bench/bench_training.py`` part 2 (the same code path:
``page_choices`` -> ``ui.models.training.make_config`` -> ``transformer.train.train`` at 1 thread),
stated conservatively; a task without a measurement gets no promise.
"""

from __future__ import annotations

from typing import Any

from transformer.text.tasks import TASKS
from transformer.train import TrainConfig

DEFAULTS = TrainConfig()
STRING_TASKS = ("copy", "reverse", "sort")
DEFAULT_SECONDS = 60

_COMMON: dict[str, Any] = {
    "n_train": 5000, "tokenizer": "bpe", "vocab_size": 160, "separate_vocab": False,
    "d_model": DEFAULTS.d_model, "n_heads": DEFAULTS.n_heads, "n_layers": DEFAULTS.n_layers, "d_ff": DEFAULTS.d_ff,
    "dropout": DEFAULTS.dropout, "schedule": "noam", "warmup": DEFAULTS.warmup, "lr_factor": DEFAULTS.lr_factor,
    "label_smoothing": DEFAULTS.label_smoothing, "norm_first": False, "max_seconds": DEFAULT_SECONDS,
}
_PER_TASK: dict[str, dict[str, Any]] = {
    "numbers": {"task_options": {"max_number": 9999}, "vocab_size": DEFAULTS.vocab_size},  # 160 left "null" in letters
    "dates": {"task_options": {}},
    "sentences": {"task_options": {"max_clauses": 1}, "norm_first": True, "d_model": 64, "d_ff": 256},
    **{task: {"task_options": {"max_len": 12}, "tokenizer": "char", "norm_first": True,
              "d_model": 64, "d_ff": 256, "warmup": 300} for task in STRING_TASKS},
}

# From bench/bench_training.py part 2, 2026-11-22 afternoon (after the batch cap of 64 examples and the
# time cooldown): one 60-s run per task at 1 thread on the 2-core machine (load average 1.1-2.4), exact
# match on 200 test pairs, rounded down.
PROMISES: dict[str, str] = {
    "numbers": "a run reached about 99% exact match on numbers up to 9,999 after 60 s, every number 0-100 right",
    "dates": "a run reached about 100% exact match after 60 s",
    "copy": "a run reached about 100% exact match after 60 s",
    "reverse": "a run reached about 100% exact match after 60 s",
    "sort": "a run reached about 99% exact match after 60 s",
    "sentences": "a run reached about 37% exact match (BLEU about 54) after 60 s: one-clause sentences need minutes",
}


def page_choices(task: str) -> dict[str, Any]:
    """The keyword arguments of ``ui.models.training.make_config`` for a built-in task's default run."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid choices: {', '.join(TASKS)}")
    choices = {**_COMMON, **_PER_TASK[task], "task": task}
    choices["task_options"] = dict(choices["task_options"])
    return choices


def promise(task: str | None) -> str | None:
    """What the default run of a built-in task reaches, as measured; None for a user's file
    (nothing is known about it) or a task not measured."""
    return PROMISES.get(task) if task else None


def bleu_note(metrics: dict[str, float], outputs_are_single_words: bool) -> str | None:
    """Why BLEU reads 0 when the references are single words: BLEU counts matching 4-grams
    of words, which a one-word output cannot have; chrF (character n-grams) measures it."""
    if outputs_are_single_words and metrics.get("bleu", 1.0) == 0.0:
        return "BLEU is 0 because every reference is a single word (no word 4-grams to match): read chrF instead."
    return None


# The page's widgets whose default depends on the task (session-state key -> config field).
WIDGETS = {"train_d_model": "d_model", "train_d_ff": "d_ff", "train_warmup": "warmup"}
_APPLIED = "train_defaults_applied"  # session_state: the widget defaults last written


def apply_task_defaults(state: Any, task: str | None) -> dict[str, Any]:
    """Put a task's defaults into the page's widgets (``state``: st.session_state) when they
    differ from the ones last put there, so that switching task (reverse -> numbers) changes
    them and a user's own choice survives reruns and switches between tasks sharing defaults
    (copy <-> reverse). ``task`` None: a user's own pairs. Returns the task's choices."""
    choices = page_choices(task) if task else {**_COMMON, "task": "numbers", "task_options": {}}
    wanted = {key: choices[field] for key, field in WIDGETS.items()}
    if state.get(_APPLIED) != wanted or any(key not in state for key in WIDGETS):
        for key, value in wanted.items():
            state[key] = value
        state[_APPLIED] = wanted
    return choices


def single_word_targets(task: str | None, task_options: dict[str, Any], src_lang: str, tgt_lang: str) -> bool:
    """Whether a built-in task's references are single words (reverse, numbers en->de below a
    million), judged on 50 generated pairs; False for a user's file."""
    from transformer.text.tasks import make_task

    if not task:
        return False
    try:
        pairs = make_task(task, n_train=50, n_valid=0, n_test=0, seed=1, src_lang=src_lang, tgt_lang=tgt_lang,
                          **task_options).train
    except ValueError:
        return False
    return all(len(tgt.split()) <= 1 for _, tgt in pairs)
