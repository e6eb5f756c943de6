"""What position alone achieves beside every head score (head_baselines.py), by hand, and the roles' margin
over it (Clark et al. 2019, section 4.2)."""

from __future__ import annotations

import pandas as pd
import torch
from explain_helpers import batch, tiny_model

from transformer.explain import head_summary
from transformer.explain.head_baselines import alignment_baseline, arc_baseline, bootstrap_interval
from transformer.explain.head_patterns import pattern_rows
from transformer.explain.heads import head_roles
from transformer.network.config import SpecialIds
from transformer.network.trace import Trace
from transformer.text.ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

IDS = SpecialIds(PAD_ID, UNK_ID, BOS_ID, EOS_ID)


def test_a_role_needs_to_beat_what_position_alone_achieves():
    nan = float("nan")
    base = dict(kind="cross", same=nan, previous=nan, next=nan, special=0.1, rel_nsubj=nan)
    cases = [
        (dict(alignment=0.62, alignment_baseline=0.59, alignment_low=0.55, alignment_high=0.7), "mixed"),
        (dict(alignment=0.93, alignment_baseline=0.59, alignment_low=0.85, alignment_high=0.97), "alignment"),
        (dict(alignment=0.75, alignment_baseline=0.59, alignment_low=0.58, alignment_high=0.9), "mixed"),  # low end
        # above the baseline, the whole interval too, but within BASELINE_MARGIN of it: no role
        (dict(alignment=0.65, alignment_baseline=0.59, alignment_low=0.61, alignment_high=0.69), "mixed"),
        (dict(kind="encoder", alignment=nan, rel_nsubj=0.65, rel_nsubj_baseline=0.59, rel_nsubj_low=0.61,
              rel_nsubj_high=0.69), "mixed"),
        (dict(kind="decoder", alignment=nan, agree_det=0.7, agree_det_baseline=0.62, agree_det_low=0.64,
              agree_det_high=0.76), "mixed"),
        (dict(kind="encoder", alignment=nan, rel_nsubj=0.6, rel_nsubj_baseline=0.59, rel_nsubj_low=0.5,
              rel_nsubj_high=0.7), "mixed"),
        (dict(kind="encoder", alignment=nan, rel_nsubj=0.9, rel_nsubj_baseline=0.59, rel_nsubj_low=0.8,
              rel_nsubj_high=0.95), "syntactic"),
        (dict(kind="decoder", alignment=nan, agree_det=0.7, agree_det_baseline=0.65, agree_det_low=0.6,
              agree_det_high=0.8), "mixed"),
        (dict(kind="decoder", alignment=nan, agree_det=0.9, agree_det_baseline=0.65, agree_det_low=0.8,
              agree_det_high=0.95), "agreement"),
    ]
    frame = head_roles(pd.DataFrame([{**base, **change} for change, _ in cases]))
    assert list(frame.role) == [want for _, want in cases]
    assert frame.claim[0] == ("picks a true source token in 62% of cases (95% interval 55%–70%); position alone: "
                              "59%, so no alignment role")
    assert frame.claim[1] == "picks a true source token in 93% of cases (95% interval 85%–97%); position alone: 59%"
    assert frame.claim[3].endswith("position alone: 59%, so no alignment role")
    assert "best fixed offset: 59%" in frame.claim[7]
    assert frame.claim[8].endswith("best fixed offset: 65%, so no agreement role")
    assert frame.claim[9].startswith("looks back from a German word to the word it agrees with (det) in 90% of cases")


def test_baselines_by_hand():
    # one sentence, 3 real source tokens, 3 rows: the truth is the anti-diagonal (reverse)
    alignment = torch.tensor([[[False, False, True], [False, True, False], [True, False, False]]])
    score, hits, rows = alignment_baseline(alignment, torch.ones(1, 3, dtype=torch.bool), torch.tensor([3]))
    assert score == 1 / 3 and rows.tolist() == [3.0]  # same index and proportional both hit only the middle row
    diagonal = torch.eye(3, dtype=torch.bool)[None]
    assert alignment_baseline(diagonal, torch.ones(1, 3, dtype=torch.bool), torch.tensor([3]))[0] == 1.0
    # arcs (dependent, head, relation): det always one to the right, nsubj two to the right once of two
    arcs = [[(0, 1, "det"), (1, 3, "nsubj")], [(2, 3, "det"), (0, 1, "nsubj")]]
    assert arc_baseline(arcs, "det")[:2] == (1.0, 1)
    assert arc_baseline(arcs, "nsubj")[0] == 0.5
    # every sentence with the same ratio: the interval is that ratio; otherwise it lies within the range
    low, high = bootstrap_interval(torch.tensor([[1.0], [2.0], [3.0]]), torch.tensor([2.0, 4.0, 6.0]))
    assert float(low) == float(high) == 0.5
    low, high = bootstrap_interval(torch.tensor([[0.0], [10.0]] * 10), torch.tensor([10.0, 10.0] * 10))
    assert 0.2 < float(low) < 0.5 < float(high) < 0.8




def test_the_proportional_baseline_spans_the_real_output_rows():
    """"no wild beautiful cow laughs </s>" -> "keine wild e schöne Kuh lacht </s>": 7 output rows, the last (</s>)
    with no true source. The diagonal from row 0 to row 6 onto sources 0..5 (round(t 5/6): 0 1 2 2 3 4) finds 5 of
    the 6 aligned rows; one over the 6 aligned rows alone (t 5/5 = t, as same index) finds only "keine", "wild"."""
    truth = [[0], [1], [1], [2], [3], [4], []]  # row t -> its true source positions
    alignment = torch.zeros(1, 7, 6, dtype=torch.bool)
    for t, sources in enumerate(truth):
        alignment[0, t, sources] = True
    score, hits, rows = alignment_baseline(alignment, torch.ones(1, 6, dtype=torch.bool), torch.tensor([7]))
    assert (score, hits.tolist(), rows.tolist()) == (5 / 6, [5.0], [6.0])


def test_head_summary_spans_each_sentences_own_output_rows():
    """The tiny batch: sentence 0 has 4 output rows (3 words, </s>) on 5 sources, sentence 1 two rows on 3. Rows 0,
    1, 2 of sentence 0 -> sources 0, 1, 3: round(t 4/3) finds all three (over its 3 aligned rows: 0, 2, 4, one;
    same index: 0, 1, 2, two). Sentence 1: row 0 -> source 0, found by both."""
    model, (src, tgt) = tiny_model(), batch()
    alignment = torch.zeros(2, 4, 5, dtype=torch.bool)
    alignment[0, 0, 0] = alignment[0, 1, 1] = alignment[0, 2, 3] = alignment[1, 0, 0] = True
    summary = head_summary(model, src, tgt, alignment=alignment, importance="gradient")
    cross = summary[summary.kind == "cross"]
    assert len(cross) == 4 and (cross.alignment_baseline == 1.0).all()
    trace = Trace()  # pattern_rows by itself counts the rows from the decoder input: <s> and the words, not </s>
    model(src, tgt[:, :-1], trace=trace)
    rows = pattern_rows(trace, src, tgt[:, :-1], alignment, ids=model.config.special_ids)
    assert all(row["alignment_baseline"] == 1.0 for row in rows if row["kind"] == "cross")
