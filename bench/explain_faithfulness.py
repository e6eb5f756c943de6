"""Which attribution method is faithful on which model: ERASER's comprehensiveness and sufficiency (AOPC) of every
method beside a random ranking, with AER and the randomization ρ where ``--truth`` asks for them (prints markdown
tables; never a test). docs/explain.md keeps the figures of the last run.

    python bench/explain_faithfulness.py [--models reverse,sentences-en-de,dates-de,numbers-en-de]
        [--families t5,t5-v1.1,bart,mbart,m2m100] [--sentences 10] [--truth]

Each model explains its own greedy output of the first ``--sentences`` sentences of its task (``make_task`` with the
Explain page's seed), as the Explain page does; a family stand-in (``tests/family_folders.trained_folder``: a tiny
model of the family trained to copy short texts, written by ``transformers``) explains its copies of short texts.
Every method runs with its defaults (integrated gradients: its default baseline, adaptive points) and is measured by
``transformer.explain.faithfulness`` with its own removal and the tokenizer's special tokens kept; the figures are
means over every output token of every sentence (micro-averaged), the interval and verdict those of
``faithfulness_summary`` over the same tokens. ``--truth`` adds bench/explain_truth.py's AER (the task's 200
sentences, teacher-forced on the reference) and ρ (every layer randomized, 20 sentences): about 20 minutes; for a
family stand-in ρ alone (no true alignment), over the texts and outputs its table explains.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))  # family_folders, family_helpers: the family stand-ins
warnings.filterwarnings("ignore")  # a script of its own: Streamlit's "no runtime" notes for its caches

from transformer import load_pretrained  # noqa: E402
from transformer.explain import METHODS, REGISTRY, attribute, faithfulness, faithfulness_summary  # noqa: E402
from transformer.text.tasks import make_task  # noqa: E402
from ui.compute.analysis import builtin_task  # noqa: E402
from ui.compute.faithfulness import special_positions  # noqa: E402

SEED = 4242  # the Explain page's task sentences (ui/compute/explain_alignment.py)


def pairs(pipe, texts: list[str]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each text's (1, S) source and (1, T) greedy output ``<s> y [</s>]``, as the Explain page explains it."""
    out = []
    for text in texts:
        trace = pipe.trace(text)
        tgt = [*trace.decoder_ids, *([pipe.config.eos_id] if trace.finished else [])]
        if len(tgt) >= 2:
            out.append((torch.tensor([trace.src_ids]), torch.tensor([tgt])))
    return out


def measure(pipe, texts: list[str]) -> pd.DataFrame:
    """One summary row per method and measure over every output token of ``texts``."""
    tables: dict[str, list[pd.DataFrame]] = {m: [] for m in METHODS}
    for b, (src, tgt) in enumerate(pairs(pipe, texts)):
        special = special_positions(pipe, src)
        for method in METHODS:
            table = faithfulness(pipe.model, src, tgt, attribute(pipe.model, src, tgt, method), special=special)
            tables[method].append(table.assign(batch=b))
    frames = []
    for method, parts in tables.items():
        table = pd.concat(parts, ignore_index=True)
        summary = faithfulness_summary(table)
        frames.append(summary.assign(method_name=method, removal=table.removal.iloc[0]))
    return pd.concat(frames, ignore_index=True)


def print_table(name: str, summary: pd.DataFrame, truth: dict[str, tuple[float, float]] | None) -> None:
    print(f"\n#### `{name}`\n")
    print("| method | removed | comprehensiveness (random) | sufficiency (random) | soft comp. / suff. | beats random "
          "| AER | ρ, every layer randomized |")
    print("|---|---|---|---|---|---|---|---|")
    for method in METHODS:
        rows = summary[summary.method_name == method].set_index("measure")
        comp, suff = rows.loc["comprehensiveness"], rows.loc["sufficiency"]
        soft = f"{rows.loc['soft comprehensiveness', 'method']:.3f} / {rows.loc['soft sufficiency', 'method']:.3f}"
        calls = [m for m in ("comprehensiveness", "sufficiency") if rows.loc[m, "beats_random"] != True]  # noqa: E712
        verdict = "yes" if not calls else ("undefined" if comp["rows"] == 0 else "**no**: " + ", ".join(calls))
        aer, rho = (truth or {}).get(method, (float("nan"), float("nan")))
        print(f"| {REGISTRY[method].label} | {rows.removal.iloc[0]} | {comp['method']:.3f} ({comp['random']:.3f}) "
              f"| {suff['method']:.3f} ({suff['random']:.3f}) | {soft} | {verdict} "
              f"| {'—' if aer != aer else f'{aer:.3f}'} | {'—' if rho != rho else f'{rho:+.2f}'} |")


def shipped(name: str, n: int, with_truth: bool) -> None:
    pipe = load_pretrained(name)
    meta = pipe.meta
    task = make_task(builtin_task(pipe), n_train=n, n_valid=0, n_test=0, seed=SEED,
                     src_lang=str(meta.get("src_lang", "en")), tgt_lang=str(meta.get("tgt_lang", "de")),
                     **dict(meta.get("task_options") or {})).train
    truth = None
    if with_truth:
        import explain_truth

        from ui.compute import explain_alignment as ea

        gold = ea._task_gold(name, ea.N_TASK_SENTENCES, pipe)
        aer = explain_truth.aer_rows(pipe, gold) if isinstance(gold, ea.GoldSet) else {}
        rho = explain_truth.randomization(pipe, 20)
        truth = {m: (aer.get(m, (float("nan"),))[0], rho[m]) for m in METHODS}
    print_table(name, measure(pipe, [s for s, _ in task]), truth)


def family(name: str, n: int, root: Path, tokenizers: dict[str, Path], with_truth: bool) -> None:
    import family_folders

    folder = family_folders.trained_folder(name, tokenizers, root)
    languages = family_folders.LANGUAGES.get(name, (None, None))
    pipe = load_pretrained(folder, src_lang=languages[0], tgt_lang=languages[1])
    texts = family_folders.texts(n, seed=11, high=2)
    truth = None
    if with_truth:  # no true alignment: ρ only, over the same texts and outputs the table explains
        import explain_truth

        from transformer.text.ids import pad

        both = pairs(pipe, texts)
        sources, outputs = zip(*both, strict=True)
        batch = tuple(pad([ids[0].tolist() for ids in part], "cpu", pipe.config.pad_id) for part in (sources, outputs))
        rho = explain_truth.randomization(pipe, len(both), batch)
        truth = {m: (float("nan"), rho[m]) for m in METHODS}
    print_table(f"{name} stand-in", measure(pipe, texts), truth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="reverse,sentences-en-de,dates-de,numbers-en-de")
    parser.add_argument("--families", default="", help="e.g. t5,t5-v1.1,bart,mbart,m2m100 (needs transformers)")
    parser.add_argument("--sentences", type=int, default=10)
    parser.add_argument("--truth", action="store_true", help="also AER and the randomization ρ (about 20 minutes)")
    args = parser.parse_args()
    torch.set_num_threads(2)
    for name in filter(None, args.models.split(",")):
        started = time.perf_counter()
        shipped(name, args.sentences, args.truth)
        print(f"\n({time.perf_counter() - started:.0f} s)")
    families = list(filter(None, args.families.split(",")))
    with tempfile.TemporaryDirectory() as root:
        if families:
            from family_helpers import build_family_tokenizers

            tokenizers = build_family_tokenizers(Path(root) / "tokenizers")  # once: every family's layout
        for name in families:
            started = time.perf_counter()
            family(name, args.sentences, Path(root), tokenizers, args.truth)
            print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
