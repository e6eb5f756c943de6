"""Figures at the sizes of google/flan-t5-base and facebook/nllb-200-distilled-600M (issue 32): random stand-ins
written by ``transformers`` with ``save_pretrained``, opened by ``load_pretrained`` as a user's folder is.

Prints figures, never pass/fail (the issue's targets in brackets; 2 threads, same weights, same run):
- loading: the peak memory of ``load_pretrained(folder)`` in a fresh process (VmHWM after the load minus VmHWM
  after importing torch and what the load imports) against the bytes of model.safetensors [<= 1.3x]; also float16, and
  ``transformers``' ``from_pretrained`` for comparison;
- greedy decoding at batch 1 of a ~20-token source, ``--tokens`` tokens forced (a random model never says
  ``</s>``: ours runs with ``stop_at_eos=False``, ``generate`` with ``min_new_tokens``), ours (``greedy_decode``
  with the pipeline's decoding rules, the KV cache) against ``generate(num_beams=1, do_sample=False)`` on the same
  weights, alternating, median of ``--repeats`` [ours / theirs <= 1.0];
- at NLLB size: every attribution method on one 20 + 20-token pair, each timed with the process's peak memory
  while it ran [integrated gradients <= 30 s and <= 4 GB; every other method <= 5 s], and ``head_summary``
  (gradient importance, as the app runs it on a large model) over ``--sentences`` pairs, with its progress
  [<= 120 s for 50].

    python bench/bench_families.py [--out /tmp/family-standins] [--threads 2] [--repeats 5] [--tokens 30]
        [--sentences 50] [--models flan-t5-base,nllb-600M] [--skip load,generate,explain,heads] [--methods saliency,...]

The folders are written once under ``--out`` (2.5 GB for NLLB) and reused. Their tokenizers are the small ones of
``tests/family_helpers.py`` (a few hundred pieces; the model embeds the real vocabulary's rows, which the loader
allows, docs/families.md). The weights are random: times and memory hold for the real models, outputs do not.
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # family_helpers: the tokenizers, built without a download

from memory import load_peak, reset_peak, status_kb  # noqa: E402  (bench/memory.py)

from transformer.decoding import greedy_decode  # noqa: E402
from transformer.pipeline import load_pretrained  # noqa: E402

SOURCE = "the house is small and the dog is big, hello world."
GIB = 1024 ** 3


def flan_t5_base():  # noqa: ANN201  (a transformers config)
    """google/flan-t5-base's config.json (248 M parameters)."""
    from transformers import T5Config

    return T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=2048, num_layers=12, num_decoder_layers=12,
                    num_heads=12, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                    feed_forward_proj="gated-gelu", tie_word_embeddings=False, dropout_rate=0.1,
                    layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)


def nllb_600m():  # noqa: ANN201
    """facebook/nllb-200-distilled-600M's config.json (615 M parameters, tied embeddings)."""
    from transformers import M2M100Config

    return M2M100Config(vocab_size=256206, d_model=1024, encoder_layers=12, decoder_layers=12,
                        encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                        decoder_ffn_dim=4096, activation_function="relu", scale_embedding=True,
                        max_position_embeddings=1024, dropout=0.1, attention_dropout=0.1, activation_dropout=0.0,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)


STANDINS = {"flan-t5-base": (flan_t5_base, "t5"), "nllb-600M": (nllb_600m, "nllb")}


def build_folder(out: Path, name: str) -> Path:
    """``out/name``: the stand-in written by ``save_pretrained`` with a small tokenizer of its family (reused)."""
    folder = out / name
    if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
        return folder
    from family_helpers import build_family_tokenizers
    from transformers import AutoModelForSeq2SeqLM

    make_config, layout = STANDINS[name]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer_folder = build_family_tokenizers(Path(scratch))[layout]
        with torch.random.fork_rng():
            torch.manual_seed(0)
            model = AutoModelForSeq2SeqLM.from_config(make_config()).eval()
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True)
        del model
        for path in tokenizer_folder.iterdir():
            shutil.copyfile(path, folder / path.name)
    if layout == "t5":
        untie_generator(folder)
    gc.collect()
    print(f"wrote {folder} in {time.perf_counter() - start:.0f} s")
    return folder


def untie_generator(folder: Path) -> None:
    """Give the T5 file an ``lm_head.weight`` of its own and config.json ``tie_word_embeddings: false``, as
    flan-t5-base's files have them (``transformers`` 5 builds T5 tied and saves no ``lm_head``: 223 M, not 248 M)."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    generator = torch.Generator().manual_seed(1)
    tensors["lm_head.weight"] = torch.randn(tensors["shared.weight"].shape, generator=generator) * 0.05
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    document = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    document.pop("scale_decoder_outputs", None)
    document["tie_word_embeddings"] = False
    (folder / "config.json").write_text(json.dumps(document, indent=2), encoding="utf-8")


# -- memory ------------------------------------------------------------------------------------------------------

def bench_load(folder: Path, threads: int) -> None:
    weights = (folder / "model.safetensors").stat().st_size
    print(f"\nloading {folder.name}: model.safetensors {weights / GIB:.2f} GiB (peak = VmHWM after the load "
          "in a fresh process minus VmHWM after its imports)")
    for label, theirs, dtype in (("ours, float32", False, "torch.float32"), ("ours, float16", False, "torch.float16"),
                                 ("transformers from_pretrained, float32", True, "torch.float32")):
        found = load_peak(folder, threads, theirs=theirs, dtype=dtype)
        peak = (found["peak"] - found["base"]) * 1024
        print(f"  {label:38s} peak +{peak / GIB:.2f} GiB = {peak / weights:.2f}x the weights' bytes  "
              f"[<= 1.3x]; resident after +{(found['rss'] - found['base']) * 1024 / GIB:.2f} GiB; "
              f"{found['seconds']:.1f} s; {found['parameters'] / 1e6:.1f} M parameters")


# -- decoding ----------------------------------------------------------------------------------------------------

def bench_generate(folder: Path, repeats: int, tokens: int) -> None:
    from transformers import AutoModelForSeq2SeqLM

    pipe = load_pretrained(folder)
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float32).eval()
    src = pipe.encode_source(SOURCE)  # (1, S): [source code] tokens </s>, as translate gives the encoder
    rules = pipe._rules  # the forced target language code (NLLB); none for T5
    forced = {"forced_bos_token_id": rules.forced_bos_id} if rules and rules.forced_bos_id is not None else {}

    def ours() -> list[int]:
        return greedy_decode(pipe.model, src, max_len=tokens, stop_at_eos=False, rules=rules).tokens[0]

    def generate() -> list[int]:
        with torch.inference_mode():
            out = theirs.generate(src, attention_mask=torch.ones_like(src), num_beams=1, do_sample=False,
                                  max_new_tokens=tokens, min_new_tokens=tokens, **forced)
        return out[0, 1:].tolist()

    ours_tokens, their_tokens = ours(), generate()  # warm both
    times: dict[str, list[float]] = {"ours": [], "theirs": []}
    for _ in range(repeats):  # alternating, so that a busy moment of the machine falls on both
        for label, call in (("ours", ours), ("theirs", generate)):
            start = time.perf_counter()
            call()
            times[label].append(time.perf_counter() - start)
    mine, their = statistics.median(times["ours"]), statistics.median(times["theirs"])
    best = min(times["ours"]) / min(times["theirs"])
    print(f"\ngreedy decoding, {folder.name}, batch 1, source {src.size(1)} tokens, {tokens} tokens forced, "
          f"median of {repeats}: ours {mine * 1e3 / tokens:.1f} ms/token ({mine:.2f} s; runs "
          f"{', '.join(f'{t:.2f}' for t in times['ours'])}), generate {their * 1e3 / tokens:.1f} ms/token "
          f"({their:.2f} s; {', '.join(f'{t:.2f}' for t in times['theirs'])}): ours / theirs = {mine / their:.2f} "
          f"(best runs: {best:.2f})  [<= 1.0]; {len(ours_tokens)} and {len(their_tokens)} tokens, the same: "
          f"{ours_tokens == their_tokens}")


# -- explanations at NLLB size ------------------------------------------------------------------------------------

def random_pairs(vocab: int, n: int, length: int, bos: int, eos: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, length) sources and (n, 1 + length) targets ``<s> y </s>``, random ids in [4, vocab), no padding."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab, (n, length), generator=generator)
    src[:, -1] = eos
    tgt = torch.cat([torch.full((n, 1), bos), torch.randint(4, vocab, (n, length), generator=generator)], dim=1)
    tgt[:, -1] = eos
    return src, tgt


def bench_explain(folder: Path, repeats: int, methods: list[str] | None = None) -> None:
    from transformer.explain import METHODS, attribute

    pipe = load_pretrained(folder)
    config = pipe.config
    src, tgt = random_pairs(config.src_vocab_size, 1, 20, config.bos_id, config.eos_id, seed=1)
    held = status_kb("VmRSS") * 1024
    print(f"\nattribution of one pair at {folder.name} size, S = {src.size(1)}, T-1 = {tgt.size(1) - 1} "
          f"(resident with the model: {held / GIB:.2f} GiB); peak = the process's VmHWM while the method ran:")
    for method in methods or METHODS:
        runs = 1 if method == "integrated_gradients" else repeats
        if runs > 1:
            attribute(pipe.model, src, tgt, method)  # warm
        reset_peak()
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            result = attribute(pipe.model, src, tgt, method)
            seconds.append(time.perf_counter() - start)
        peak = status_kb("VmHWM") * 1024
        extra = ""
        if result.delta is not None:
            gap = result.source.sum(-1) - result.delta  # f(x) - f(baseline) per row, as bench_marian reads it
            extra = f", |delta| / |gap| summed over rows {float(result.delta.abs().sum() / gap.abs().sum()):.3f}"
        target = "[<= 30 s, <= 4 GB]" if method == "integrated_gradients" else "[<= 5 s]"
        print(f"  {method:22s} {statistics.median(seconds):7.2f} s  peak {peak / GIB:5.2f} GiB "
              f"(+{(peak - held) / GIB:.2f}) {target}{extra}")
    del pipe
    gc.collect()


def bench_heads(folder: Path, n: int) -> None:
    from transformer.explain import head_summary

    pipe = load_pretrained(folder)
    config = pipe.config
    src, tgt = random_pairs(config.src_vocab_size, n, 20, config.bos_id, config.eos_id, seed=2)
    told: list[float] = []
    reset_peak()
    start = time.perf_counter()
    head_summary(pipe.model, src, tgt, importance="gradient",
                 progress=lambda share, what: told.append(time.perf_counter()))
    seconds = time.perf_counter() - start
    gaps = [b - a for a, b in zip([start, *told], [*told, start + seconds], strict=True)]
    scaled = f"; x {50 / n:.1f} -> about {seconds * 50 / n:.0f} s for 50 (extrapolated)" if n != 50 else ""
    print(f"\nhead_summary (importance gradient) at {folder.name} size over {n} pairs of 20 + 20 tokens: "
          f"{seconds:.1f} s{scaled}  [<= 120 s for 50, with progress]; progress told {len(told)} times, longest "
          f"silence {max(gaps):.1f} s; peak {status_kb('VmHWM') * 1024 / GIB:.2f} GiB")
    del pipe
    gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "family-standins")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=30)
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--models", default=",".join(STANDINS), help=f"comma-separated, of {', '.join(STANDINS)}")
    parser.add_argument("--skip", default="", help="comma-separated: load, generate, explain, heads")
    parser.add_argument("--methods", default="", help="comma-separated attribution methods (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    skip = set(filter(None, args.skip.split(",")))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name in filter(None, args.models.split(",")):
        folder = build_folder(args.out, name)
        if "load" not in skip:
            bench_load(folder, args.threads)
        if "generate" not in skip:
            bench_generate(folder, args.repeats, args.tokens)
        if name.startswith("nllb") and "explain" not in skip:
            bench_explain(folder, max(1, args.repeats // 2), list(filter(None, args.methods.split(","))))
        if name.startswith("nllb") and "heads" not in skip:
            bench_heads(folder, args.sentences)


if __name__ == "__main__":
    main()
