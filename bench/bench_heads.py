"""Time head_summary, the pruning curve and activation patching on the shipped models.

Prints figures, never pass/fail. Targets from the issue: head_summary over 200 sentences of
the model's task <= 10 s; activation_patching over every site of a ~20-token pair <= 5 s
(the dates model reads ISO dates of 11 tokens: its pair is as long as its task allows). The
sentences are the model's own test split, drawn again from its train_args as
pretrained/measure.py does. Also prints the roles found and the pruning curve's first steps.

    python bench/bench_heads.py [--sentences 200] [--threads 1] [--pruning 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer import load_pretrained  # noqa: E402
from transformer.explain import activation_patching, head_summary, pruning_curve, true_alignment  # noqa: E402
from transformer.text.ids import pad  # noqa: E402
from transformer.train import TrainConfig, encode_split, make_splits  # noqa: E402

PAIRS = {  # (clean, corrupted): equal token lengths
    "reverse": ("abc123xyz0987qwerty1", "abc123xyz0987qwertz1"),
    "dates-de": ("2026-11-21", "2026-03-21"),
    "numbers-en-de": ("three hundred and forty-seven thousand two hundred and twelve",
                      "three hundred and forty-seven thousand six hundred and twelve"),
}


def timed(call):
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1,
                        help="more threads than free cores slows every op down many times over")
    parser.add_argument("--pruning", type=int, default=40, help="held-out sentences for the pruning curve")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, (clean_text, corrupt_text) in PAIRS.items():
        pipe = load_pretrained(Path(__file__).resolve().parent.parent / "pretrained" / name)
        train_args = pipe.meta["train_args"]
        cfg = TrainConfig.from_saved(train_args)
        test = make_splits(cfg).test
        examples = encode_split(test[:args.sentences + args.pruning], pipe.src_tokenizer, pipe.tgt_tokenizer)
        src, tgt = pad(examples.src[:args.sentences]), pad(examples.tgt[:args.sentences])
        alignment = None
        if cfg.task == "reverse":  # character pieces: the true alignment is the anti-diagonal
            alignment = torch.zeros(src.size(0), tgt.size(1) - 1, src.size(1), dtype=torch.bool)
            for b, (s, t) in enumerate(test[:args.sentences]):
                alignment[b, :len(t) + 1, :len(s) + 1] = true_alignment("reverse", s, t, [*s, "</s>"], [*t, "</s>"])
        head_summary(pipe.model, src[:4], tgt[:4])  # warm
        summary, seconds = timed(lambda: head_summary(pipe.model, src, tgt, alignment=alignment))
        print(f"\n{name}: {len(summary)} heads, {src.size(0)} sentences (S {src.size(1)}, T {tgt.size(1)})")
        print(f"  head_summary       {seconds:6.2f} s   (target <= 10 s)")
        print("  roles: " + ", ".join(f"{role} {count}" for role, count in summary.role.value_counts().items()))
        top = summary.sort_values("importance", ascending=False).head(3)
        print("  most important: " + ", ".join(f"{r.kind}.{r.layer}.h{r.head} {r.importance:+.3f} ({r.role})"
                                               for r in top.itertuples()))
        if alignment is not None:
            print(f"  best cross-attention alignment share: {summary.alignment.max():.2f}")

        held_src = pad(examples.src[args.sentences:])
        held_tgt = pad(examples.tgt[args.sentences:])
        curve, seconds = timed(lambda: pruning_curve(pipe.model, held_src, held_tgt, summary))
        print(f"  pruning_curve      {seconds:6.2f} s   ({held_src.size(0)} held-out sentences, "
              f"{len(curve)} steps); exact match by heads off: "
              + " ".join(f"{n}:{em:.2f}" for n, em in zip(curve.n_heads_off, curve.exact_match, strict=True)))

        clean, corrupt = (torch.tensor([pipe.source_ids(t)[1]]) for t in (clean_text, corrupt_text))
        output, changed = (pipe.tgt_tokenizer.encode(pipe.translate(t)) for t in (clean_text, corrupt_text))
        tgt_pair = torch.tensor([[2, *output, 3]])
        # the first output token the corruption changes (row t predicts output token t)
        position = next((t for t, (a, b) in enumerate(zip(output, changed, strict=False)) if a != b), 0)
        activation_patching(pipe.model, clean, corrupt, tgt_pair, position)  # warm
        table, seconds = timed(lambda: activation_patching(pipe.model, clean, corrupt, tgt_pair, position))
        print(f"  activation_patching {seconds:5.2f} s   (target <= 5 s): {len(table)} sites, S {clean.size(1)}, "
              f"T-1 {tgt_pair.size(1) - 1}, row {position}; largest effects: "
              + ", ".join(f"{r.site}@{r.index} {r.effect:.2f}"
                          for r in table.reindex(table.effect.abs().sort_values(ascending=False).index)
                          .head(3).itertuples()))


if __name__ == "__main__":
    main()
