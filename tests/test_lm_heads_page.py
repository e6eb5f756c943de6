"""The Heads page on a decoder-only language model (issue 41 item 6): ``ui/compute/lm_heads.py`` runs
``lm_head_summary`` with the tokenizer's special ids, ``ui/charts/lm_heads.py`` draws its grids (the values are the
table's, the chance and interval in the hover, the claim marked, the sliding-window layers and the key/value groups
named), and the page (``ui/sections/lm_heads.py``) renders them in place of the translation models' sections.

The folders are ``lm_folders``' tiny Gemma-2 (4 layers alternating sliding (5 keys) and full, 4 query heads on 2
key/value heads) and GPT-2 (no window, no grouping). The page is driven through its sidebar stand-in (the sidebar
hands it an ``AppContext`` on the loaded pipeline), so it is checked on its own; opening a decoder-only folder through
the model menu is the sidebar's (tested with it).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from app_helpers import RecordedBars
from lm_folders import build_lm_folder
from streamlit.testing.v1 import AppTest

from transformer import load_pretrained
from transformer.explain.lm_heads import CHUNK, lm_head_roles, lm_head_summary
from ui.charts import lm_heads as charts
from ui.compute import lm_heads, shared_work
from ui.models.menu import ModelEntry
from ui.sections import app_context
from ui.sections import lm_heads as section
from ui.sections import sidebar as sidebar_module
from ui.sections.app_context import AppContext

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "6_heads.py")


@pytest.fixture(scope="module")
def lm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lm-heads-page")
    for name in ("gemma2", "gpt2"):
        build_lm_folder(name, root)
    return root


@pytest.fixture(scope="module")
def gemma(lm_dir: Path):  # noqa: ANN201  (an LMPipeline)
    return load_pretrained(lm_dir / "gemma2")


@pytest.fixture(scope="module")
def summary(gemma) -> pd.DataFrame:
    table = lm_heads.compute_lm_summary(gemma)
    assert isinstance(table, pd.DataFrame)
    return table


def with_roles(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with layer 1 (full) head 2 made an induction head and layer 3 head 0 a sink, roles recomputed:
    a random model's heads are all mixed."""
    frame = summary.copy()
    for layer, head, scores in ((1, 2, ("induction", "copying")), (3, 0, ("sink",))):
        row = (frame.layer == layer) & (frame["head"] == head)
        for score in scores:
            frame.loc[row, [score, f"{score}_low", f"{score}_high"]] = [0.9, 0.85, 0.95]
    return lm_head_roles(frame)


def test_the_summary_is_lm_head_summary_with_the_tokenizers_special_ids(gemma, summary, monkeypatch) -> None:
    special = set(gemma.tokenizer.special_ids)
    assert special - set(gemma.config.special_ids), "the test needs special ids the config does not name"
    told = {}

    def recording(model, **options):  # noqa: ANN001, ANN202
        told.update(options)
        return lm_head_summary(model, **options)

    monkeypatch.setattr(lm_heads, "lm_head_summary", recording)
    lm_heads.compute_lm_summary(gemma)
    assert special <= set(told["special"])
    assert (told["n_prompts"], told["repeat_length"], told["seed"]) == (lm_heads.N_PROMPTS, lm_heads.REPEAT_LENGTH,
                                                                         lm_heads.SEED)
    expected = lm_head_summary(gemma.model, n_prompts=lm_heads.N_PROMPTS, repeat_length=lm_heads.REPEAT_LENGTH,
                               seed=lm_heads.SEED, special=special)
    pd.testing.assert_frame_equal(summary, expected)  # the same draw: deterministic, exactly equal


def test_the_repeat_fits_the_models_positions_and_tokens() -> None:
    def stand_in(max_len: int, vocab: int, special: set[int]) -> SimpleNamespace:
        config = SimpleNamespace(max_len=max_len, tgt_vocab_size=vocab, special_ids=(0, 1, 2, 3))
        return SimpleNamespace(config=config, tokenizer=SimpleNamespace(special_ids=frozenset(special)))

    assert lm_heads.repeat_length(stand_in(64, 500, set())) == lm_heads.REPEAT_LENGTH
    assert lm_heads.repeat_length(stand_in(9, 500, set())) == 4  # 1 + 2 * 4 = 9 positions
    assert lm_heads.repeat_length(stand_in(64, 10, {4, 5})) == 4  # 10 ids, 6 of them special
    assert lm_heads.why_not(stand_in(64, 500, set())) is None
    assert "5 positions" in lm_heads.why_not(stand_in(4, 500, set()))


@pytest.mark.parametrize("score", list(charts.SCORES))
def test_each_score_grid_holds_the_summarys_values_and_its_chance_in_the_hover(summary, score) -> None:
    fig = charts.lm_score_grid(summary, score)
    heat = fig.data[0]
    for row in summary.itertuples():
        value, hover, text = (heat.z[row.layer][row.head], heat.customdata[row.layer][row.head],
                              heat.text[row.layer][row.head])
        expected = getattr(row, score)
        if pd.isna(expected):  # drawn "undefined" with the reason, never 0
            assert np.isnan(value) and text == charts.UNDEFINED and "undefined" in hover and row.undefined
            assert "sliding window of 5 keys" in hover
        else:
            assert value == expected
            assert f"{expected:.3f} (95% interval {getattr(row, f'{score}_low'):.3f}" in hover
        assert f"chance ({charts.CHANCE[score]}): {getattr(row, f'{score}_baseline'):.3f}" in hover
        assert f"layer {row.layer}" in hover and f"head {row.head} (key/value head {row.kv_head})" in hover


def test_the_grids_name_the_sliding_window_layers_and_the_key_value_groups(gemma, summary) -> None:
    c = gemma.config
    group = c.n_heads // c.kv_heads
    assert charts.kv_groups(summary) == {kv: [h for h in range(c.n_heads) if h // group == kv]
                                         for kv in range(c.kv_heads)}
    layers = [f"layer {i}" + (f" · sliding, {c.sliding_window} keys" if c.layer_type(i) == "sliding" else "")
              for i in range(c.n_decoder_layers)]
    assert layers[0].endswith("sliding, 5 keys") and layers[1] == "layer 1"
    heads = [f"h{h} · kv{h // group}" for h in range(c.n_heads)]
    roles = charts.lm_role_grid(summary)
    for fig in (charts.lm_score_grid(summary, "sink"), roles):
        assert list(fig.layout.yaxis.ticktext) == layers
        assert list(fig.layout.xaxis.ticktext) == heads
        lines = [s.x0 for s in fig.layout.shapes if s.type == "line"]
        assert lines == [group - 0.5]  # between the two key/value groups
    shaded = sorted((s.y0 + s.y1) / 2 for s in roles.layout.shapes if s.type == "rect")
    assert shaded == [i for i in range(c.n_decoder_layers) if c.layer_type(i) == "sliding"]


def test_a_model_without_grouping_or_windows_draws_neither(lm_dir) -> None:
    table = lm_heads.compute_lm_summary(load_pretrained(lm_dir / "gpt2"))
    fig = charts.lm_role_grid(table)
    assert list(fig.layout.xaxis.ticktext) == [f"h{h}" for h in sorted(table["head"].unique())]
    assert all("sliding" not in label for label in fig.layout.yaxis.ticktext)
    assert not fig.layout.shapes


def test_the_claim_is_marked_on_the_scores_a_role_rests_on_and_led_by_its_head(summary) -> None:
    table = with_roles(summary)
    assert table.set_index(["layer", "head"]).role[(1, 2)] == "induction"
    assert table.set_index(["layer", "head"]).role[(3, 0)] == "sink"
    for score, marked in (("induction", {(1, 2)}), ("copying", {(1, 2)}), ("sink", {(3, 0)}),
                          ("previous_token", set())):
        text = charts.lm_score_grid(table, score).data[0].text
        found = {(i, j) for i, row in enumerate(text) for j, cell in enumerate(row) if charts.CLAIM_MARK in cell}
        assert found == marked, score
    claims = charts.lm_head_claims(table)
    assert claims[0].startswith("**layer 1, head 2 (key/value head 1)** (induction): puts 90% of its weight")
    assert claims[1].startswith("**layer 3, head 0 (key/value head 0)** (sink): puts 90% of its weight on the first")
    hover = [d[3] for trace in charts.lm_role_grid(table).data if trace.name == "induction" for d in trace.customdata]
    assert hover and "role: induction" in hover[0] and "uniform attention" in hover[0]
    counts = charts.role_counts(table).set_index("role")
    assert counts.heads["induction"] == 1 and counts.heads["sink"] == 1 and counts.heads.sum() == len(table)


def open_heads_page(monkeypatch: pytest.MonkeyPatch, pipeline, key: str = "folder:lm-heads-gemma2") -> AppTest:
    """pages/6_heads.py with a sidebar that hands it ``pipeline`` (the model menu's part is the sidebar's tests'),
    as the model ``key`` (the shared results are kept per key for the test process's life)."""
    entry = ModelEntry("tiny gemma2", key, "opened")
    monkeypatch.setattr(sidebar_module, "sidebar", lambda **_: AppContext(entry, pipeline, "cpu", "Hello"))
    monkeypatch.setattr(app_context, "cache_key", lambda key, _: key)  # a language model has no language pair
    return AppTest.from_file(PAGE, default_timeout=120).run()


def test_the_heads_page_shows_a_language_models_roles(monkeypatch, gemma, summary) -> None:
    at = open_heads_page(monkeypatch, gemma)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert [s.value for s in at.subheader] == ["The roles", "Every score per head", "The table"]
    words = " ".join(m.value for m in [*at.markdown, *at.caption])
    for said in ("Olsson et al. 2022", "Xiao et al. 2023", section.NOT_SHOWN, "Sliding-window layers (0, 2)",
                 "kv0: heads 0, 1; kv1: heads 2, 3", *(meaning for _, meaning in charts.SCORES.values())):
        assert said in words, said
    shown = at.dataframe[-1].value
    pd.testing.assert_frame_equal(shown.reset_index(drop=True), summary, check_dtype=False)
    at.radio(key=section.SCORE_KEY).set_value("sink").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "attention sink" in " ".join(c.value for c in at.caption)


def test_the_page_writes_each_roles_claim_led_by_its_head(monkeypatch, gemma, summary) -> None:
    monkeypatch.setattr(lm_heads, "compute_lm_summary", lambda pipeline, progress=None: with_roles(summary))
    monkeypatch.setattr(section, "CLAIMS_SHOWN", 1)
    at = open_heads_page(monkeypatch, gemma, key="folder:lm-heads-roles")
    assert not at.exception, [e.value for e in at.exception]
    claims = [m.value for m in at.markdown if m.value.startswith("- **layer")]
    assert claims == [f"- {charts.lm_head_claims(with_roles(summary), limit=1)[0]}"]
    assert "(induction)" in claims[0]
    assert "1 more head with a role: their claims are in the table below." in [c.value for c in at.caption]


def test_the_scores_move_a_progress_bar_once_per_chunk_of_prompts(monkeypatch, gemma) -> None:
    bars = RecordedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    at = open_heads_page(monkeypatch, gemma, key="folder:lm-heads-progress")  # a key nothing computed before
    assert not at.exception, [e.value for e in at.exception]
    label = "Scoring every head on repeated random tokens:"
    chunks = range(0, lm_heads.N_PROMPTS, CHUNK)
    assert bars.told == [(0.0, label), *((first / lm_heads.N_PROMPTS, f"{label} prompts {first + 1}-"
                                          f"{first + CHUNK} of {lm_heads.N_PROMPTS}") for first in chunks),
                         (1.0, f"{label} bootstrap intervals")]
    assert bars.emptied == 1


def test_on_a_large_model_the_scores_wait_for_the_button(monkeypatch, gemma) -> None:
    monkeypatch.setattr(section, "is_large", lambda _: True)
    at = open_heads_page(monkeypatch, gemma)
    assert not at.exception and [s.value for s in at.subheader] == []
    assert "Nothing is computed" in at.info[0].value
    at.button(key="lm_heads_run").click().run()
    assert not at.exception and [s.value for s in at.subheader][0] == "The roles"


def test_the_heads_page_opens_a_decoder_only_folder_from_the_model_menu(lm_dir, monkeypatch) -> None:
    """Through app.py and the real sidebar, once the model menu opens decoder-only folders (branch h-lmapp1)."""
    import app_helpers

    from ui.state import settings

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(lm_dir))
    at = app_helpers.open_page("6_heads", "Hello world", "gemma2")
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert [s.value for s in at.subheader] == ["The roles", "Every score per head", "The table"]
