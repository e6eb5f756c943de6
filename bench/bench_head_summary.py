"""Time head_summary as the Heads page runs it: 200 sentences of a shipped model's task, with the true
alignment, the source and German arcs (sentences), baselines, bootstrap intervals and both importances.

Prints figures, never pass/fail. Target from issue 22: within 12 s on the 2-core CPU.

    PYTHONPATH=. python bench/bench_head_summary.py [model ...]   (default: sentences-en-de; 1 thread)
"""

from __future__ import annotations

import sys
import time

import torch

from transformer import explain
from transformer.pipeline import PRETRAINED_DIR, load_pretrained
from transformer.text.ids import pad, source_ids, target_ids
from ui.compute import heads
from ui.compute.analysis import builtin_task


def main(names: list[str]) -> None:
    torch.set_num_threads(1)  # as bench_heads.py: more threads than free cores slows every op down many times over
    for name in names or ["sentences-en-de"]:
        pipe = load_pretrained(PRETRAINED_DIR / name)
        pairs = heads._pairs(pipe, heads.N_SENTENCES)
        src = pad([source_ids(pipe.src_tokenizer, s) for s, _ in pairs], pipe.device, pipe.config.pad_id)
        tgt = pad([target_ids(pipe.tgt_tokenizer, t) for _, t in pairs], pipe.device, pipe.config.pad_id)
        start = time.perf_counter()
        alignment, arcs, target_arcs = heads._structure(builtin_task(pipe), pairs, src, tgt, pipe)
        summary = explain.head_summary(pipe.model, src, tgt, alignment=alignment, arcs=arcs, target_arcs=target_arcs,
                                       importance=heads.importance_measure(pipe))
        seconds = time.perf_counter() - start
        print(f"{name}: head_summary over {len(pairs)} sentences, {len(summary)} heads, {torch.get_num_threads()} "
              f"threads: {seconds:.2f} s (annotations included; target <= 12 s)")
        print("  roles: " + ", ".join(f"{role} {n}" for role, n in summary.role.value_counts().items()))


if __name__ == "__main__":
    main(sys.argv[1:])
