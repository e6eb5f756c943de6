"""Which scores fit a task: exact match and chrF for character tasks, BLEU and chrF for word tasks.

BLEU (Papineni et al. 2002) is the geometric mean of word 1- to 4-gram precisions: an output
that is one "word" of characters (a reversed string, a sorted one) has no word 2-, 3- or
4-grams, so its BLEU is 0 even when it is right. chrF (Popović 2015) counts character n-grams
and exact match counts whole right outputs: they measure a character task. Word tasks (numbers,
dates, sentences, a user's pairs with a subword tokenizer) get BLEU and chrF, the MT standard.
"""

from __future__ import annotations

from dataclasses import dataclass

CHARACTER_TASKS: tuple[str, ...] = ("copy", "reverse", "sort")

# Score name -> its label on the pages.
LABELS = {"exact_match": "exact match", "token_accuracy": "token accuracy", "bleu": "BLEU", "chrf": "chrF"}


@dataclass(frozen=True)
class TaskScores:
    """The scores that fit a task, in the order to show them, and why (one sentence for the page)."""

    names: tuple[str, ...]
    why: str


def task_scores(task: str | None, tokenizer_kind: str) -> TaskScores:
    """The scores that measure ``task`` (a built-in task's name, or None for a user's pairs)
    read through a ``tokenizer_kind`` ("bpe", "unigram" or "char") tokenizer."""
    if task in CHARACTER_TASKS or tokenizer_kind == "char":
        what = f"the {task} task" if task in CHARACTER_TASKS else "a model with a character tokenizer"
        return TaskScores(("exact_match", "token_accuracy", "chrf"),
                          f"Exact match and chrF for {what}: BLEU counts whole-word 4-grams, and an output "
                          "of characters without spaces has none, so BLEU reads 0 even for a right answer; "
                          "chrF counts character n-grams.")
    return TaskScores(("exact_match", "token_accuracy", "bleu", "chrf"),
                      "BLEU and chrF, the translation standards (sacrebleu): BLEU over word n-grams, "
                      "chrF over character n-grams; exact match counts outputs right as a whole.")
