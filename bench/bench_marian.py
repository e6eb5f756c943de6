"""Figures at opus-mt size: a randomly initialised model of Helsinki-NLP/opus-mt-en-de's shape (d_model 512,
6+6 layers, 8 heads, d_ff 2048, vocabulary 58,101, SiLU, Marian's positions, tied embeddings).

Prints figures, never pass/fail (targets of issue 19 in brackets):
- greedy decoding at batch 1, 30 tokens forced: ours with the KV cache, ours without it, and transformers'
  ``generate(num_beams=1, do_sample=False)`` on the same weights in the same run (ours / theirs <= 1.0;
  cache >= 2x);
- every attribution method on one 20-token pair (integrated gradients <= 10 s, |delta| within 5% of the
  score gap; every other method <= 2 s), with the process's peak memory after each (<= 2 GB for IG);
- ``head_summary`` over ``--sentences`` pairs (<= 60 s for 50), with ``--importance`` gradient (default) or ablation.

    python bench/bench_marian.py [--threads 2] [--repeats 3] [--sentences 50] [--skip generate,heads]

The weights are random: figures of time and memory hold for the real model; deltas and outputs do not.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer.decoding import greedy_decode  # noqa: E402
from transformer.explain import METHODS, attribute, head_summary  # noqa: E402
from transformer.network.config import TransformerConfig  # noqa: E402
from transformer.network.model import Transformer  # noqa: E402

VOCAB = 58_101
OPUS_MT = TransformerConfig(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=512, n_heads=8, n_layers=6,
                            d_ff=2048, dropout=0.1, max_len=512, pad_id=VOCAB - 1, eos_id=0, unk_id=1,
                            bos_id=VOCAB - 1, activation="silu", positional="marian", final_norm=False,
                            tying="all")


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(call, repeats: int) -> tuple[float, object]:
    result = call()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def random_ids(generator: torch.Generator, batch: int, length: int) -> torch.Tensor:
    ids = torch.randint(2, VOCAB - 1, (batch, length), generator=generator)
    ids[:, -1] = OPUS_MT.eos_id
    return ids


def bench_generate(model: Transformer, repeats: int, length: int = 30) -> None:
    src = random_ids(torch.Generator().manual_seed(0), 1, 20)
    cached, _ = timed(lambda: greedy_decode(model, src, max_len=length, stop_at_eos=False), repeats)
    uncached, _ = timed(lambda: greedy_decode(model, src, max_len=length, stop_at_eos=False, use_cache=False),
                        repeats)
    print(f"greedy, batch 1, {length} tokens: ours {cached / length * 1e3:.1f} ms/token (KV cache), "
          f"{uncached / length * 1e3:.1f} ms/token without: cache {uncached / cached:.2f}x  [>= 2x]")
    try:
        from transformers import MarianConfig, MarianMTModel
    except ImportError:
        print("transformers is not installed: no side-by-side with generate")
        return
    from transformer.hub.families import marian
    from transformer.hub.mapping import to_theirs

    config = MarianConfig(vocab_size=VOCAB, d_model=512, encoder_layers=6, decoder_layers=6,
                          encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                          decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
                          pad_token_id=VOCAB - 1, eos_token_id=0, decoder_start_token_id=VOCAB - 1,
                          max_position_embeddings=512)
    theirs = MarianMTModel(config).eval()
    theirs.load_state_dict(to_theirs(marian.FAMILY, model.state_dict(), model.config), strict=False)
    with torch.inference_mode():
        run = lambda: theirs.generate(src, attention_mask=torch.ones_like(src), num_beams=1, do_sample=False,  # noqa: E731
                                      max_new_tokens=length, min_new_tokens=length)
        generate, out = timed(run, repeats)
    ours_tokens = greedy_decode(model, src, max_len=length, stop_at_eos=False).tokens[0]
    print(f"transformers generate: {generate / length * 1e3:.1f} ms/token; ours / theirs = {cached / generate:.2f}  "
          f"[<= 1.0]; same tokens: {out[0, 1:].tolist() == ours_tokens}")


def bench_explain(model: Transformer, repeats: int) -> None:
    generator = torch.Generator().manual_seed(1)
    src = random_ids(generator, 1, 20)
    tgt = torch.cat([torch.tensor([[OPUS_MT.bos_id]]), random_ids(generator, 1, 20)], dim=1)  # 20 rows
    print(f"\nattribution of one pair, S = {src.size(1)}, T-1 = {tgt.size(1) - 1}:")
    for method in METHODS:
        seconds, result = timed(lambda m=method: attribute(model, src, tgt, m),
                                1 if method == "integrated_gradients" else repeats)
        extra = ""
        if result.delta is not None:
            gap = result.source.sum(-1) - result.delta  # f(x) - f(baseline) per row
            extra = f", |delta| / |gap| summed over rows {float(result.delta.abs().sum() / gap.abs().sum()):.3f}"
        print(f"  {method:22s} {seconds:7.2f} s  peak memory {peak_mb():7.0f} MB{extra}")


def bench_heads(model: Transformer, n: int, importance: str) -> None:
    generator = torch.Generator().manual_seed(2)
    src = random_ids(generator, n, 20)
    tgt = torch.cat([torch.full((n, 1), OPUS_MT.bos_id), random_ids(generator, n, 20)], dim=1)
    start = time.perf_counter()
    head_summary(model, src, tgt, importance=importance)
    print(f"\nhead_summary (importance={importance}) over {n} pairs of 20 tokens: "
          f"{time.perf_counter() - start:.1f} s  [<= 60 s for 50], "
          f"peak memory {peak_mb():.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--skip", default="", help="comma-separated: generate, explain, heads")
    parser.add_argument("--importance", default="gradient", choices=("gradient", "ablation"),
                        help="head importance measure (ablation: one forward per head, minutes at this size)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    skip = set(filter(None, args.skip.split(",")))
    torch.manual_seed(0)
    model = Transformer(OPUS_MT).eval()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; opus-mt-size model, "
          f"{model.num_parameters() / 1e6:.1f} M parameters; peak memory {peak_mb():.0f} MB")
    if "generate" not in skip:
        bench_generate(model, args.repeats)
    if "explain" not in skip:
        bench_explain(model, args.repeats)
    if "heads" not in skip:
        bench_heads(model, args.sentences, args.importance)


if __name__ == "__main__":
    main()
