"""Which attribution method to trust on which shipped model: AER against the task's true alignment and the
model randomization correlation, per method and per layer view (prints markdown tables; never a test).

    python bench/explain_truth.py [--models reverse,dates-de,sentences-en-de,numbers-en-de] [--sentences 20]

For each model with a true alignment (the task's own 200 sentences, as the Explain page's AER table scores them):
every method's AER through all layers, and ALTI+'s and value zeroing's for the last decoder layer alone
(``attribute(..., layer=-1)``); integrated gradients on the first 50 sentences (the page leaves it out for time).
Then, on the first ``--sentences`` of them, Adebayo et al.'s cascading randomization: Spearman's ρ between the
trained model's map and the map with every layer randomized (explain/sanity.py). A method whose ρ stays high
explains the input's structure, not the model. docs/explain.md keeps the figures of the last run.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")  # a script of its own: Streamlit's "no runtime" notes for its caches

from transformer import load_pretrained  # noqa: E402
from transformer.explain import METHODS, REGISTRY, attribute  # noqa: E402
from transformer.explain.sanity import _correlation, randomized_copies  # noqa: E402
from transformer.text.ids import pad, source_ids, target_ids  # noqa: E402
from transformer.text.tasks import make_task  # noqa: E402
from ui.compute import explain_alignment as ea  # noqa: E402
from ui.compute.analysis import builtin_task  # noqa: E402
from ui.compute.explain import LAYERED, label, layer_view  # noqa: E402

IG_SENTENCES = 50
IG_STEPS = 32  # integrated gradients' points in the randomization, as the app's check takes


def views(n_layers: int) -> list[tuple[str, str, dict]]:
    """(key, method, options) of every map: each method rolled out, ALTI+ and value zeroing also at the last layer."""
    out = []
    for m in METHODS:
        out.append((m, m, {}))
        if m in LAYERED:
            out.append((layer_view(m, n_layers - 1), m, {"layer": n_layers - 1}))
    return out


def aer_rows(pipe, gold) -> dict[str, tuple[float, int, float]]:
    """key -> (AER, sentences, share of target words left out as undefined)."""
    scores = ea._measure(pipe, gold)
    rows = {key: (aer, n, scores.undefined.get(key, 0.0)) for key, (aer, n) in scores.methods.items()}
    count = min(IG_SENTENCES, len(gold.src_ids))
    links, dropped = {}, {}
    for _, chunk, src, tgt in ea._batches(gold, count, "cpu", pipe.config.pad_id):
        maps = attribute(pipe.model, src, tgt, "integrated_gradients").source
        links.update({i: ea._links(gold, i, maps[b]) for b, i in enumerate(chunk)})
        dropped.update({i: ea._undefined(gold, i, maps[b]) for b, i in enumerate(chunk)})
    rows["integrated_gradients"] = (ea._aer(gold, links, dropped), count, 0.0)
    return rows


def task_batch(pipe, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` sentences of the model's task (its own seed), padded: (B, S), (B, T)."""
    meta = pipe.meta
    pairs = make_task(builtin_task(pipe), n_train=n, n_valid=0, n_test=0, seed=ea.SEED,
                      src_lang=str(meta.get("src_lang", "en")), tgt_lang=str(meta.get("tgt_lang", "de")),
                      **dict(meta.get("task_options") or {})).train
    src = [source_ids(pipe.src_tokenizer, s) for s, _ in pairs]
    tgt = [target_ids(pipe.tgt_tokenizer, t) for _, t in pairs]
    return pad(src, "cpu", pipe.config.pad_id), pad(tgt, "cpu", pipe.config.pad_id)


def randomization(pipe, n: int, batch: tuple[torch.Tensor, torch.Tensor] | None = None) -> dict[str, float]:
    """key -> ρ between the trained map and the map with every layer randomized, over ``n`` task sentences (or the
    padded ``batch`` (B, S), (B, T) given: a family stand-in's, which has no task)."""
    src, tgt = task_batch(pipe, n) if batch is None else batch
    todo = views(pipe.config.n_decoder_layers)

    def maps(model) -> dict[str, torch.Tensor]:
        return {key: attribute(model, src, tgt, m, **(options | ({"n_steps": IG_STEPS}
                                                                 if m == "integrated_gradients" else {}))).source
                for key, m, options in todo}

    trained = maps(pipe.model)
    *_, (_, randomized) = randomized_copies(pipe.model)
    final = maps(randomized)
    return {key: _correlation(trained[key], final[key]) for key in trained}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="reverse,dates-de,sentences-en-de,numbers-en-de")
    parser.add_argument("--sentences", type=int, default=20, help="sentences of the randomization check")
    args = parser.parse_args()
    torch.set_num_threads(2)
    for name in args.models.split(","):
        started = time.perf_counter()
        pipe = load_pretrained(name)
        gold = ea._task_gold(name, ea.N_TASK_SENTENCES, pipe)
        aer = aer_rows(pipe, gold) if isinstance(gold, ea.GoldSet) else {}
        rho = randomization(pipe, args.sentences)
        print(f"\n#### `{name}`" + ("" if aer else f" (no AER: {gold})") + "\n")
        print("| method | AER | sentences | words undefined | ρ, every layer randomized |")
        print("|---|---|---|---|---|")
        for key, _, _ in views(pipe.config.n_decoder_layers):
            a, n, undefined = aer.get(key, (float("nan"), 0, 0.0))
            name_ = label(key) if key in rho else REGISTRY[key].label
            print(f"| {name_} | {a:.3f} | {n} | {undefined:.0%} | {rho[key]:+.2f} |" if aer else
                  f"| {name_} | — | — | — | {rho[key]:+.2f} |")
        print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
