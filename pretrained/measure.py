"""Re-measure a shipped model: reload the folder, greedy-decode its whole test split, print the figures.

    python pretrained/measure.py                    # every model in pretrained/
    python pretrained/measure.py pretrained/reverse --extra 10000

The test split is drawn again from the run's own arguments (config.json's train_args: task,
options, sizes, seed), so it holds exactly the sources the model never saw in training.
Two independent checks:

- ``train.evaluate`` on the reloaded weights: teacher-forced loss and token accuracy, then
  greedy outputs scored by exact match, chrF and BLEU (what the trainer reports at the end);
- ``Pipeline.translate`` (the public API, greedy) on every test source, compared with the
  reference: exact match again, through text cleaning, tokenization and decoding;
- with ``--extra N``: N more sources drawn with another seed (none in any split), translated
  the same way, for a tighter estimate than the 1,000 test sentences give; with ``--long N``, N
  more of at least 26 words (the sentences task's long tail), and exact match by length.

Also prints the folder's size, parameter count and training time from the model's meta, and
for character-level models the share of rows whose head-averaged cross-attention peaks on
the anti-diagonal (the reversal pattern); for the ``sentences`` task, how often the
cross-attention peaks on the true source word (``explain.true_alignment``), over all output
pieces and over the verbs that German moves to the end of their clause. Prints figures only; it
changes nothing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


LONG = 26  # words: the sentences with three clauses that two-clause training never showed (issue 22)
LENGTHS = ((1, 10), (11, 15), (16, 20), (21, 25), (26, 30), (31, 99))


def by_length(scored: list[tuple[str, bool]]) -> list[tuple[str, list[tuple[str, bool]]]]:
    """(source, right) pairs grouped by the source's length in words, shortest first."""
    return [(f"{low}-{high}" if high < 99 else f"{low}+",
             [(src, ok) for src, ok in scored if low <= len(src.split()) <= high]) for low, high in LENGTHS]


def stored_dtypes(folder: Path) -> set[str]:
    """The dtypes the folder's weights are stored in (safetensors header, no tensor read)."""
    from transformer.checkpoints.weights_header import read_header

    return {dtype for dtype, _ in read_header(folder / "model.safetensors").values()}


def trainer_comparison(trainer: dict[str, float], scores: dict[str, float], dtypes: set[str]) -> str:
    """How the re-measured metrics compare with those the trainer reported on its float32 weights: identical, or
    the largest difference, which weights stored in half precision explain (sentences-en-de: float16)."""
    gaps = {k: abs(trainer[k] - v) for k, v in scores.items() if k in trainer}
    if len(gaps) < len(scores):
        missing = sorted(set(scores) - set(gaps))
        return f"the trainer reported no final test {', '.join(missing)}"
    worst = max(gaps, key=gaps.get)
    if gaps[worst] < 1e-9:
        return "the trainer's own final test metrics are identical"
    half = sorted(d for d in dtypes if d in ("F16", "BF16"))
    why = (f" (expected: the weights are stored in {'/'.join(half)}, the trainer measured them in float32)" if half
           else " (NOT expected: the weights are stored as trained)")
    return (f"the trainer's own final test metrics differ by at most {gaps[worst]:.2g} ({worst}: "
            f"{trainer[worst]:.6g} then, {scores[worst]:.6g} now){why}")


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def anti_diagonal_share(pipe, texts: list[str]) -> dict[int, float]:
    """Per decoder layer: the share of output rows (EOS row left out) whose head-averaged
    cross-attention has its argmax at source position n-1-t."""
    hits: dict[int, int] = {}
    rows = 0
    for text in texts:
        traced = pipe.trace(text)
        n = len(text)
        rows += n
        for layer in range(traced.trace.n_layers("decoder")):
            weights = traced.trace.attention("cross", layer)[0].mean(0)  # (T, S)
            argmax = weights[:n].argmax(-1).tolist()
            hits[layer] = hits.get(layer, 0) + sum(a == n - 1 - t for t, a in enumerate(argmax))
    return {layer: count / rows for layer, count in hits.items()}


def sentence_alignment_share(pipe, texts: list[str]) -> dict[tuple[int, str], float]:
    """Per (decoder layer, head or "mean"): the share of output pieces whose cross-attention peaks on
    a piece of the English word they translate, over all pieces ("all") and over the pieces of verbs
    moved to the end of their clause (the German word before the verb translates a later English
    word). Outputs that differ from the reference are skipped (their alignment is unknown)."""
    from transformer.explain import true_alignment
    from transformer.explain.alignment import piece_spans
    from transformer.text import sentences

    hits: dict[tuple[int, str, str], int] = {}
    counts = {"all": 0, "moved verb": 0}
    for text in texts:
        traced = pipe.trace(text)
        structure = sentences.parse(text)
        if traced.output_text != structure.target:
            continue
        truth = true_alignment("sentences", traced.src_text, traced.output_text, traced.src_pieces,
                               [*traced.output_pieces, "</s>"])[:-1]  # (n, S): the EOS row left out
        verbs = {head for _, head, relation in structure.arcs if relation == "nsubj"}
        moved = {k for k in range(1, len(structure.tgt_words)) if structure.alignment[k][0] in verbs
                 and structure.alignment[k - 1][0] > structure.alignment[k][0]}
        spans = sentences.words(traced.output_text)
        rows = {"all": list(range(len(truth))), "moved verb": [
            i for i, span in enumerate(piece_spans(traced.output_text, traced.output_pieces))
            if span and any(spans[k][1] <= span[1] - 1 < spans[k][2] for k in moved)]}
        for kind, chosen in rows.items():
            counts[kind] += len(chosen)
            for layer in range(traced.trace.n_layers("decoder")):
                weights = traced.trace.attention("cross", layer)[0][:, : len(truth)]  # (H, n, S)
                for head, w in [("mean", weights.mean(0)), *enumerate(weights)]:
                    top = w[chosen].argmax(-1)
                    hit = int(truth[chosen].gather(1, top[:, None]).sum()) if chosen else 0
                    hits[layer, str(head), kind] = hits.get((layer, str(head), kind), 0) + hit
    return {key: count / max(counts[key[2]], 1) for key, count in hits.items()}


def measure(folder: Path, extra: int = 0, long: int = 0) -> None:
    import torch

    from transformer import load_pretrained
    from transformer.checkpoints.checkpoint import list_snapshots
    from transformer.text.tasks import make_task
    from transformer.train import TrainConfig, encode_split, evaluate, make_splits

    torch.set_num_threads(1)
    started = time.perf_counter()
    pipe = load_pretrained(folder)
    load_seconds = time.perf_counter() - started
    meta = pipe.meta
    args = meta["train_args"]
    cfg = TrainConfig.from_saved(args)
    splits = make_splits(cfg)
    test = splits.test
    examples = encode_split(test, pipe.src_tokenizer, pipe.tgt_tokenizer)
    started = time.perf_counter()
    scores = evaluate(pipe.model, examples, pipe.tgt_tokenizer, smoothing=cfg.label_smoothing,
                      max_output_len=meta["max_output_len"], batch_tokens=cfg.batch_tokens * 2,
                      device=torch.device("cpu"))
    outputs = pipe.translate([src for src, _ in test])
    decode_seconds = time.perf_counter() - started
    wrong = [(src, ref, out) for (src, ref), out in zip(test, outputs, strict=True) if out != ref]

    print(f"== {folder}")
    print(f"size {folder_size(folder) / 1e6:.2f} MB; {meta['parameters']:,} parameters; "
          f"{meta['step']} steps in {meta['elapsed_seconds']:.0f} s on {meta['device']} "
          f"with {meta['threads']} thread(s); snapshots at steps {list_snapshots(folder)}; "
          f"loaded in {load_seconds * 1000:.0f} ms")
    print(f"test split, {len(test)} unseen sources (reloaded, greedy; {decode_seconds:.1f} s):")
    print("  evaluate():  " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()))
    print(f"  translate(): exact match {1 - len(wrong) / len(test):.4f} ({len(test) - len(wrong)}/{len(test)})")
    print("  " + trainer_comparison(meta.get("metrics", {}).get("test", {}), scores, stored_dtypes(folder)))
    for src, ref, out in wrong[:10]:
        print(f"  wrong: {src!r} -> {out!r} (reference {ref!r})")
    scored = [(src, out == ref) for (src, ref), out in zip(test, outputs, strict=True)]
    if (extra or long) and not args.get("data"):
        seen = {src for split in (splits.train, splits.valid, splits.test) for src, _ in split}
        unseen = [pair for pair in make_task(cfg.task, n_train=extra + len(seen) + long * 60, n_valid=0, n_test=0,
                                             seed=cfg.seed + 1, src_lang=cfg.src_lang, tgt_lang=cfg.tgt_lang,
                                             **cfg.task_options).train if pair[0] not in seen]
        for kind, more in (("", unseen[:extra]), (f" of {LONG} words or more",
                                                  [p for p in unseen[extra:] if len(p[0].split()) >= LONG][:long])):
            if not more:
                continue
            outputs = pipe.translate([src for src, _ in more])
            right = sum(out == ref for (_, ref), out in zip(more, outputs, strict=True))
            scored += [(src, out == ref) for (src, ref), out in zip(more, outputs, strict=True)]
            print(f"  {len(more)} more unseen sources{kind} (another seed, none in any split): exact match "
                  f"{right / len(more):.4f} ({right}/{len(more)})")
            for (src, ref), out in [(p, o) for p, o in zip(more, outputs, strict=True) if o != p[1]][:5]:
                print(f"  wrong: {src!r} -> {out!r} (reference {ref!r})")
    if args.get("task") == "sentences":
        print("  exact match by length in words, over every source above: " + ", ".join(
            f"{label} {sum(ok for _, ok in rows) / len(rows):.4f} ({sum(ok for _, ok in rows)}/{len(rows)})"
            for label, rows in by_length(scored) if rows))
    if args.get("task") == "reverse":
        share = anti_diagonal_share(pipe, [src for src, _ in test[:100]])
        print("  cross-attention argmax on the anti-diagonal (100 test strings, head average): "
              + ", ".join(f"layer {layer} {value:.1%}" for layer, value in share.items()))
    if args.get("task") == "sentences":
        share = sentence_alignment_share(pipe, [src for src, _ in test[:200]])
        for kind in ("all", "moved verb"):
            print(f"  cross-attention argmax on the true source word, {kind} pieces (200 test sentences): "
                  + ", ".join(f"layer {layer} head {head} {value:.1%}"
                              for (layer, head, k), value in share.items() if k == kind))


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="checkpoint folders (default: all in pretrained/)")
    parser.add_argument("--extra", type=int, default=0, metavar="N",
                        help="also translate N more sources of the task, drawn with another seed, none in any split")
    parser.add_argument("--long", type=int, default=0, metavar="N",
                        help=f"and N more unseen sources of at least {LONG} words (the sentences task's long tail)")
    args = parser.parse_args()
    folders = args.folders or sorted(p for p in Path(__file__).parent.iterdir() if (p / "config.json").is_file())
    for folder in folders:
        measure(folder, args.extra, args.long)
    return 0


if __name__ == "__main__":
    sys.exit(main())
