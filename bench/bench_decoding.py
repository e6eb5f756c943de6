"""How much the KV cache speeds up greedy decoding (prints figures; never a test).

    python bench/bench_decoding.py [--repeats 7] [--threads 1] [--model pretrained/numbers-en-de]

Times ``greedy_decode`` with and without the cache on the same inputs, alternating the two
in one process so that both see the same machine load, and reports the best (minimum) time
of each, their ratio, and the median of the per-pair ratios (both robust on a shared
machine). Outputs are forced to a fixed length by ignoring EOS (``stop_at_eos=False``), so both
paths do the same number of steps; the tokens are checked to be identical.

Cases: the shipped models at batch 1 on one typical input each, at the length of their own
output; a random-weight model with d_model 256, 3 + 3 layers and 60 output tokens (batch 1
and 8); a random model of the size ``transformer.train`` builds by default (d_model 128, 4 heads,
2 + 2 layers, a character vocabulary) with 30 output tokens (batch 1 and 8); and, if
``--model`` names a trained checkpoint folder, that model on a few sentences.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere without installing

from transformer import Transformer, TransformerConfig  # noqa: E402
from transformer.decoding import greedy_decode  # noqa: E402


def time_pair(model: Transformer, src_ids: torch.Tensor, length: int, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of each (cached, uncached) greedy decoding of ``length`` tokens, run alternately."""
    cached, uncached = [], []
    greedy_decode(model, src_ids, max_len=length, stop_at_eos=False)  # warm-up
    for _ in range(repeats):
        for use_cache, times in ((True, cached), (False, uncached)):
            start = time.perf_counter()
            result = greedy_decode(model, src_ids, max_len=length, stop_at_eos=False, use_cache=use_cache)
            times.append(time.perf_counter() - start)
            if use_cache:
                reference = result.tokens
            elif result.tokens != reference:
                raise SystemExit("cached and uncached decoding disagree: this is a bug")
    return cached, uncached


def random_case(d_model: int, n_heads: int, n_layers: int, vocab: int, batch: int, src_len: int, seed: int = 0):
    torch.manual_seed(seed)
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=d_model, n_heads=n_heads,
                               n_layers=n_layers, d_ff=4 * d_model, dropout=0.0, max_len=128)
    model = Transformer(config).eval()
    src_ids = torch.randint(4, vocab, (batch, src_len))
    return model, src_ids


def report(name: str, model: Transformer, src_ids: torch.Tensor, length: int, repeats: int) -> None:
    cached, uncached = time_pair(model, src_ids, length, repeats)
    best = min(uncached) / min(cached)
    paired = statistics.median(u / c for c, u in zip(cached, uncached, strict=True))
    print(f"{name:<46} {length:>4} {1000 * min(cached):>10.1f} {1000 * min(uncached):>12.1f} "
          f"{best:>7.2f}x {paired:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1, for stable timings)")
    parser.add_argument("--model", default="pretrained/numbers-en-de", help="a trained checkpoint folder, if any")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), best of {args.repeats} runs")
    print(f"{'case':<46} {'toks':>4} {'cached ms':>10} {'uncached ms':>12} {'speed-up':>8} {'median':>8}")
    for batch in (1, 8):
        model, src_ids = random_case(d_model=256, n_heads=8, n_layers=3, vocab=1000, batch=batch, src_len=20)
        report(f"random d_model=256 3+3 layers V=1000 batch={batch}", model, src_ids, 60, args.repeats)
    for batch in (1, 8):  # the size transformer.train builds by default, with a character vocabulary
        model, src_ids = random_case(d_model=128, n_heads=4, n_layers=2, vocab=64, batch=batch, src_len=24)
        report(f"random d_model=128 2+2 layers V=64 batch={batch}", model, src_ids, 30, args.repeats)

    # The shipped models at batch 1, each at the length of its own output for a typical input (EOS included):
    # what a user of the app waits for (issue 11's target: the cache at least 2x).
    shipped = {"numbers-en-de": "three hundred and twelve thousand, four hundred and five", "dates-de": "2021-03-04",
               "reverse": "abcdefghij0123456789", "sentences-en-de": "the dog sleeps because the man sees the cat"}
    root = Path(__file__).resolve().parents[1] / "pretrained"
    for name, text in shipped.items():
        if (root / name / "config.json").exists():
            from transformer.pipeline import load_pretrained

            pipe = load_pretrained(root / name)
            src_ids = pipe.encode_source([text])
            length = len(greedy_decode(pipe.model, src_ids, max_len=pipe.config.max_len).tokens[0]) + 1
            report(f"shipped {name} batch=1, its own output", pipe.model, src_ids, length, args.repeats)

    folder = Path(args.model)
    if (folder / "config.json").exists():
        from transformer.pipeline import load_pretrained

        pipe = load_pretrained(folder)
        sentences = ["three hundred and twelve", "seven", "nine hundred and ninety-nine thousand"]
        src_ids = pipe.encode_source(sentences)
        length = min(30, pipe.config.max_len)
        report(f"{folder.name} batch={len(sentences)}", pipe.model, src_ids, length, args.repeats)
    else:
        print(f"({folder} not found: trained-model case skipped)")


if __name__ == "__main__":
    main()
