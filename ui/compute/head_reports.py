"""Head reports shipped beside the shipped models, so the Heads page opens at once on them.

The statistics over 200 sentences and the pruning curve take tens of seconds on a 2-core CPU
(one ablation per head, one greedy decoding of 40 sentences per point of the curve). For a model
folder whose weights never change, that work is done once: ``python -m ui.compute.head_reports`` writes
``head_report/`` into each folder of pretrained/ (the summary, a pruning curve per importance measure
and the facts, as JSON), and the
page reads it back when it is current: written from the same weights (their SHA-256), by the same
computation (``REPORT_VERSION``, the sentence counts and the seed). Anything else is computed live
(``head_report``: the shipped report, else ``ui.compute.heads.compute_report`` kept for every session).
This module imports ``ui.compute.heads``, never the other way.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import pandas as pd

from transformer.checkpoints.checkpoint import WEIGHTS_FILE
from transformer.pipeline import PRETRAINED_DIR, Pipeline, load_pretrained
from ui.compute import heads
from ui.compute.shared_work import shared

REPORT_DIR = "head_report"
# Bump when the statistics' computation changes: every shipped report is then stale.
REPORT_VERSION = 3  # 2: agreement heads, both importances, UD relation names; 3: the alignment baseline over the
# real output rows, the gradient importance normalised per layer (and the gradient curve in that order)
_FACTS = "report.json"


def weights_digest(folder: Path) -> str:
    """SHA-256 of the folder's weights file (its identity: a retrained model has other weights). Computed once
    per version of the file (path, modification time, size): the Heads page asks on every rerun."""
    stat = (Path(folder) / WEIGHTS_FILE).stat()
    return _digest(str(Path(folder) / WEIGHTS_FILE), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _digest(path: str, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _recipe() -> dict:
    """What a report depends on besides the weights."""
    return {"version": REPORT_VERSION, "n_sentences": heads.N_SENTENCES, "n_held_out": heads.N_HELD_OUT,
            "seed": heads.SEED}


def save_report(report: heads.HeadReport, folder: Path) -> Path:
    """Write ``report`` into ``folder/head_report`` (a new folder swapped in whole, never half-written)."""
    folder = Path(folder)
    staging = Path(tempfile.mkdtemp(dir=folder, prefix=".head_report-"))
    report.summary.to_json(staging / "summary.json", orient="split", index=False, indent=0)
    for by, curve in report.curves.items():
        curve.to_json(staging / _curve_file(by), orient="split", index=False, indent=0)
    facts = {**_recipe(), "weights_sha256": weights_digest(folder), "with_alignment": report.with_alignment,
             "relations": report.relations, "n_pruning": report.n_pruning, "curves": report.measures}
    (staging / _FACTS).write_text(json.dumps(facts, indent=1), encoding="utf-8")
    target = folder / REPORT_DIR
    if target.exists():
        old = folder / f".head_report-old-{os.getpid()}"
        target.rename(old)
        staging.rename(target)
        for path in old.iterdir():
            path.unlink()
        old.rmdir()
    else:
        staging.rename(target)
    return target


def _curve_file(by: str) -> str:
    """The file of the pruning curve that follows the ``by`` importance measure."""
    return f"curve_{by}.json"


def _read_curve(path: Path) -> pd.DataFrame:
    """A pruning curve read back: JSON has lists where the curve has (kind, layer, head) tuples."""
    curve = _read_frame(path)
    if "heads_off" in curve:
        curve["heads_off"] = [[tuple(head) for head in row] for row in curve["heads_off"]]
    return curve


def _read_frame(path: Path) -> pd.DataFrame:
    """A table written by ``DataFrame.to_json(orient="split")``, read back without guessing types."""
    with open(path, encoding="utf-8") as file:
        data = json.load(file)
    return pd.DataFrame(data["data"], columns=data["columns"])


def shipped_report(folder: Path | None) -> heads.HeadReport | None:
    """The report shipped in ``folder`` if it is current (same weights, same computation), else None."""
    if folder is None:
        return None
    target = Path(folder) / REPORT_DIR
    try:
        facts = json.loads((target / _FACTS).read_text(encoding="utf-8"))
        if {k: facts.get(k) for k in _recipe()} != _recipe() or facts.get("weights_sha256") != weights_digest(
                Path(folder)):
            return None
        summary = _read_frame(target / "summary.json")
        curves = {str(by): _read_curve(target / _curve_file(str(by))) for by in facts["curves"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return heads.HeadReport(summary, curves, int(facts["n_sentences"]), bool(facts["with_alignment"]),
                            [str(r) for r in facts["relations"]], int(facts["n_pruning"]))


def head_report(model_key: str, device: str, pipeline: Pipeline, folder: Path | None = None
                ) -> heads.HeadReport | str:
    """Every head's statistics over ``heads.N_SENTENCES`` sentences of the model's task, or why there are none:
    the report shipped in the model's ``folder`` when it is current, else computed (kept for every session)."""
    return shipped_report(folder) or shared("head_reports", (model_key, device),
                                            lambda progress: heads.compute_report(pipeline, progress),
                                            label="Measuring every head over many sentences:")


def main(folders: list[str]) -> None:
    """Compute and write the report of each folder (default: every shipped model with a built-in task)."""
    paths = [Path(f) for f in folders] or sorted(p for p in PRETRAINED_DIR.iterdir() if (p / WEIGHTS_FILE).is_file())
    for path in paths:
        def progress(share: float, what: str, name: str = path.name) -> None:  # one line, rewritten as it goes
            print(f"\r{name}: {share:4.0%} {what:<90.90}", end="", flush=True)

        report = heads.compute_report(load_pretrained(path), progress)
        print()
        if isinstance(report, str):
            print(f"{path.name}: no report ({report})")
            continue
        print(f"{path.name}: wrote {save_report(report, path)}")


if __name__ == "__main__":
    main(sys.argv[1:])
