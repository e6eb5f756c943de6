"""A run's training snapshots (``folder/snapshots/step_0000100.safetensors``): which steps have one, and thinning
them to a few spread on a log scale so that the Training page can replay how attention formed. Writing one is
``checkpoint.save_snapshot``; reading one is ``checkpoint.load_checkpoint(folder, step=...)``.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

SNAPSHOT_DIR = "snapshots"
_SNAPSHOT_RE = re.compile(r"^step_(\d+)\.safetensors$")


def thin_steps(steps: list[int], keep: int) -> list[int]:
    """At most ``keep`` of ``steps``, spread evenly on a log scale; the first and the last always stay.

    Repeatedly drops the inner step whose two neighbours are closest together in
    log(1 + step) (the earlier one on a tie): 0, 1, 2, 5, 10, ..., 1000, 2000, 2400 thinned
    to 6 keeps 0, 5, 50, 200, 500, 2400, each kept step some steady factor after the last.
    """
    if keep < 2:
        raise ValueError(f"keep must be at least 2 (the first and the last step), got {keep}")
    kept = sorted(set(steps))
    while len(kept) > keep:
        gaps = [math.log1p(kept[i + 1]) - math.log1p(kept[i - 1]) for i in range(1, len(kept) - 1)]
        del kept[1 + gaps.index(min(gaps))]
    return kept


def prune_snapshots(folder: str | os.PathLike, keep: int) -> list[int]:
    """Delete snapshots so that at most ``keep`` remain (chosen by ``thin_steps``); returns the removed steps."""
    steps = list_snapshots(folder)
    kept = set(thin_steps(steps, keep))
    removed = [step for step in steps if step not in kept]
    for step in removed:
        (Path(folder) / SNAPSHOT_DIR / f"step_{step:07d}.safetensors").unlink()
    return removed


def list_snapshots(folder: str | os.PathLike) -> list[int]:
    """Steps that have a snapshot, ascending; [] when there are none."""
    directory = Path(folder) / SNAPSHOT_DIR
    if not directory.is_dir():
        return []
    steps = [int(m.group(1)) for p in directory.iterdir() if (m := _SNAPSHOT_RE.match(p.name))]
    return sorted(steps)
