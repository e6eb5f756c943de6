"""The Explain page under AppTest: every method drawn, a chosen output token, bad input as messages; ALTI+'s source
share, word alignments scored by AER (the task's sentences, or the user's with a Pharaoh file), the randomization
check, and a large model whose costly methods wait for a button."""

from __future__ import annotations

import base64
from pathlib import Path

import app_helpers
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io
import pytest
from app_helpers import RecordedBars, assert_clean
from streamlit.testing.v1 import AppTest

from transformer.explain import METHODS
from ui.state import settings


@pytest.fixture
def models_dir(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    return tiny_models_dir


def open_explain(text: str, model: str = "tiny-reverse", **state) -> AppTest:
    return app_helpers.open_page("5_explain", text, model, **state)


def with_views(methods, last: int = 1) -> list[str]:
    """The page's maps: each method, and after value zeroing and ALTI+ their last decoder layer alone."""
    from ui.compute.explain import LAYERED, layer_view

    return [key for m in methods for key in ([m, layer_view(m, last)] if m in LAYERED else [m])]


@pytest.mark.parametrize("model", ["tiny-reverse", "tiny-numbers"])
def test_explain_page_draws_every_method(models_dir: Path, model: str) -> None:
    at = open_explain("abc12" if model == "tiny-reverse" else "seven", model)
    assert_clean(at)
    assert at.title[0].value == "Explain an output token"
    charts = at.get("plotly_chart")
    assert len(charts) == 4  # one token's row, IG's convergence, small multiples, one further section: agreement
    assert at.get("download_button")
    assert not at.info, [i.value for i in at.info]  # every method ran on this model
    assert at.subheader[0].value.startswith("Which source tokens made")
    for section in ("lens", "residual"):  # the logit lens, the residual stream (two panels in one figure)
        at.get("button_group")[-1].set_value(section).run()
        assert_clean(at)
        assert len(at.get("plotly_chart")) == 4
        assert at.query_params["more"] == section


def test_the_logit_lens_is_computed_only_when_its_section_is_shown(models_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """At NLLB size the lens (a generator pass per decoder layer) took seconds of every first visit and its whole
    (layers, rows, vocabulary) array stayed cached (455 MB a sentence): the page computes it for its section
    only, and keeps each cell's top token."""
    from ui.compute import explain as compute

    calls = []
    for name in ("logit_lens", "logit_lens_top"):  # whichever the page computes the lens with
        original = getattr(compute, name, None)
        if original is not None:
            monkeypatch.setattr(compute, name, lambda *a, _f=original, **k: calls.append(1) or _f(*a, **k))
    at = open_explain("cab21")
    assert_clean(at)
    assert at.query_params["more"] == "agreement" and not calls  # the page opened: no lens
    at.get("button_group")[-1].set_value("lens").run()
    assert_clean(at)
    assert calls == [1]
    heat = keyed_figure(at, "explain_lens").data[0]
    z = values(heat.z).ravel()  # p of each cell's top token
    assert len(z) == 2 * len(at.get("button_group")[0].proto.options)  # tiny-reverse: 2 decoder layers x rows
    assert np.all((z > 0) & (z <= 1))


def test_choosing_another_output_token(models_dir: Path) -> None:
    at = open_explain("abc12")
    pills = at.get("button_group")[0]
    options = pills.proto.options
    assert len(options) >= 2
    first = options[0].content if hasattr(options[0], "content") else str(options[0])
    assert "<s> →" in first or "&lt;s&gt; →" in first, first  # a row says what it reads and what it predicts
    pills.set_value(1).run()
    assert_clean(at)
    assert at.subheader[0].value.startswith("Which source tokens made")
    assert "1" in str(at.session_state["explain_row"])


def test_the_true_alignment_is_scored_for_a_generated_task(models_dir: Path) -> None:
    at = open_explain("abc12")  # reverse: output character k comes from source character n-1-k
    frames = [f.value for f in at.dataframe]
    accuracy = next(f for f in frames if "method" in f.columns)
    assert list(accuracy["method"]) == with_views(METHODS)
    values = accuracy.iloc[:, 1].to_numpy(dtype=float)
    assert np.all((values >= 0) & (values <= 1))


def test_numbers_has_no_true_alignment_and_says_why(models_dir: Path) -> None:
    at = open_explain("seven", "tiny-numbers")
    assert_clean(at)
    assert any("No accuracy against a true alignment" in c.value for c in at.caption)


def test_an_empty_input_is_a_message(models_dir: Path) -> None:
    at = open_explain("   ")
    assert_clean(at)
    assert at.warning and "empty" in at.warning[0].value



# --- the sections of issue 21: source share, word alignments, the randomization check ------------------------


def figure(at: AppTest, index: int = -1) -> go.Figure:
    return plotly.io.from_json(at.get("plotly_chart")[index].proto.spec)


def keyed_figure(at: AppTest, key: str) -> go.Figure:
    return plotly.io.from_json(next(c for c in at.get("plotly_chart") if c.key == key).proto.spec)


def values(data) -> np.ndarray:
    """A trace's array as the page sent it: a list, or Plotly's typed array {"dtype", "bdata"} (base64)."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).astype(float)
    return np.asarray(data, dtype=float)


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.MODELS_DIR_ENV, raising=False)  # pretrained/: the shipped models


def test_the_new_sections_on_a_shipped_model(shipped: None) -> None:
    at = open_explain("abc123", "reverse")
    assert_clean(at)
    assert not any("spreads the work" in m.value for m in at.markdown)
    assert any("ALTI+" in m.value and "Ferrando et al. 2022" in m.value for m in at.markdown)  # the methods expander

    at.get("button_group")[-1].set_value("source").run()
    assert_clean(at)
    assert at.query_params["more"] == "source"
    source, prefix, *marks = figure(at).data
    share = values(source.y)
    assert len(share) == len(at.get("button_group")[0].proto.options)  # one point per output token
    defined = ~np.isnan(share)
    assert np.all((share[defined] >= 0) & (share[defined] <= 1 + 1e-6)) and prefix.fill == "tonexty"
    assert any("hallucination" in m.value for m in at.markdown)
    # reverse's last cross-attention block cancels its residual: rows ALTI+ cannot define, drawn "undefined"
    assert not defined.all() and marks and list(marks[0].text) == ["undefined"] * int((~defined).sum())
    assert sorted(values(marks[0].x)) == list(np.flatnonzero(~defined))
    assert any(c.value.startswith("Undefined for") and "cancels the residual" in c.value for c in at.caption)
    assert at.radio(key="explain_share_view").options == ["every layer (roll-out)", "decoder layer 1 alone"]
    at.radio(key="explain_share_view").set_value("alti · layer 1").run()
    assert_clean(at)
    assert len(values(figure(at).data[0].y)) == len(share)

    at.get("button_group")[-1].set_value("alignment").run()
    assert_clean(at)
    assert not at.dataframe  # nothing runs before the button
    at.button(key="explain_aer_run").click().run()
    assert_clean(at)
    table = at.dataframe[-1].value
    assert list(table.columns) == ["alignment from", "AER", "sentences", "words undefined"]
    aer = table["AER"].to_numpy(dtype=float)
    assert np.all(np.diff(aer) >= 0)  # best first
    assert set(table["sentences"]) == {200, 50}  # the cheap methods and heads on 200, the costly ones on 50
    rows = table.set_index("alignment from")
    assert rows.loc["attention", "AER"] < 0.1  # the trained reverse model reads the anti-diagonal
    assert rows.loc["value zeroing, decoder layer 1 alone", "AER"] < 0.1  # its roll-out ends on </s>: not so
    assert rows.loc["value zeroing", "AER"] > 0.5
    assert rows.loc["ALTI+", "words undefined"] > 0 and rows.loc["attention", "words undefined"] == 0
    assert "integrated gradients" not in rows.index and any("integrated gradients" in c.value for c in at.caption)
    heads = [r for r in rows.index if r.startswith("cross-attention")]
    assert len(heads) == 2 * 4  # 2 decoder layers x 4 heads
    at.toggle(key="explain_aer_shift").set_value(True).run()
    shifted = at.dataframe[-1].value
    assert sum(r.endswith("(Shift-Att)") for r in shifted["alignment from"]) == 8
    assert not shifted.set_index("alignment from")["AER"].equals(rows["AER"])

    at.get("button_group")[-1].set_value("sanity").run()
    assert_clean(at)
    at.button(key="explain_sanity_run").click().run()
    assert_clean(at)
    lines = [t for t in figure(at).data if t.mode == "lines+markers"]
    assert {t.name.split(":")[0] for t in lines} == set(METHODS)
    for line in lines:
        y = values(line.y)
        assert y[0] == 1.0 and len(y) == 1 + 1 + 2 + 2 + 1  # trained, the generator, 2 + 2 layers, the embeddings
    assert any("depends on what it learned" in m.value or "Does not depend" in m.value for m in at.markdown)


def test_integrated_gradients_baseline_is_a_choice(models_dir: Path) -> None:
    at = open_explain("abc12")
    at.selectbox(key="explain_ig_baseline").set_value("unk").run()
    assert_clean(at)
    assert at.query_params["baseline"] == "unk"
    assert any("<unk> embedding baseline" in c.value for c in at.caption)


PHARAOH_SOURCES, PHARAOH_REFERENCES = "abc def\nxyz", "fed cba\nzyx"


@pytest.fixture(scope="module")
def marian_dir(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from marian_helpers import make_marian_folder

    root = tmp_path_factory.mktemp("explain-marian")
    make_marian_folder(root / "tiny-marian")
    return root


def open_upload(monkeypatch: pytest.MonkeyPatch, marian_dir: Path, gold: str) -> AppTest:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(marian_dir))
    at = open_explain("abc", "tiny-marian", explain_more="alignment", explain_aer_sources=PHARAOH_SOURCES,
                      explain_aer_references=PHARAOH_REFERENCES)
    at.text_area(key="explain_aer_gold").set_value(gold).run()
    return at


@pytest.mark.parametrize(("gold", "message"), [
    ("0-1 1-0\n0x0", "line 2: '0x0' is not a link"),
    ("0-1 1-0", "1 lines for 2 sentences"),
    ("0-1 1-0\n0-0\n0-0", "3 lines for 2 sentences"),
    ("0-1 2-0\n0-0", "line 1: link 2-0 is out of range"),
    ("0-1 1-0\n0?3", "line 2: link 0-3 is out of range"),
])
def test_a_bad_pharaoh_file_is_a_warning(monkeypatch: pytest.MonkeyPatch, marian_dir: Path, gold: str,
                                         message: str) -> None:
    at = open_upload(monkeypatch, marian_dir, gold)
    assert_clean(at)
    warnings = [w.value for w in at.warning]
    assert any(message in w for w in warnings), warnings
    assert not [b for b in at.button if b.key == "explain_aer_run"]


def test_an_uploaded_pharaoh_file_is_scored(monkeypatch: pytest.MonkeyPatch, marian_dir: Path) -> None:
    from ui.compute import shared_work

    bars = RecordedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    at = open_upload(monkeypatch, marian_dir, "0-1 1-0\n0-0\n")  # a trailing newline is no third line
    assert_clean(at)
    assert not at.warning
    at.button(key="explain_aer_run").click().run()
    assert_clean(at)
    table = at.dataframe[-1].value
    assert set(table["sentences"]) == {2}
    assert len(table) == len(METHODS) - 1 + 2 + 2 * 2  # every method but IG, 2 layer views, 2 layers x 2 heads
    assert np.all((table["AER"] >= 0) & (table["AER"] <= 1))
    # a progress bar: one step per method (every method's 2 sentences are one chunk), one for the heads, done
    shares, texts = [share for share, _ in bars.told], [text for _, text in bars.told]
    steps = len(METHODS) + 2  # every method but integrated gradients, 2 layer views, and the heads
    assert shares == pytest.approx([0.0, *(i / steps for i in range(steps)), 1.0]) and bars.emptied == 1
    label = "Aligning every sentence with every method and head:"
    assert texts[0] == label and texts[-2] == f"{label} cross-attention heads: sentences 1-2 of 2"
    assert f"{label} attention: sentences 1-2 of 2" in texts


def test_the_pharaoh_file_can_be_uploaded(monkeypatch: pytest.MonkeyPatch, marian_dir: Path) -> None:
    at = open_upload(monkeypatch, marian_dir, "")
    assert at.file_uploader(key="explain_aer_gold_file").proto.max_upload_size_mb == 1
    at.file_uploader(key="explain_aer_gold_file").upload("gold.talp", b"0-1 1p0\n0-0", "text/plain").run()
    assert_clean(at)
    assert [b for b in at.button if b.key == "explain_aer_run"]


def test_a_large_model_waits_for_the_gradient_methods(models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.compute.model_size
    from ui.compute.explain import label, title

    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)  # every model is large
    at = open_explain("abc12")
    assert_clean(at)
    costly = {"relevancy", "saliency", "input_x_gradient", "integrated_gradients", "occlusion", "value_zeroing"}
    cheap = [m for m in METHODS if m not in costly]
    assert at.selectbox(key="explain_csv_method").options == [title(m) for m in with_views(cheap)]
    assert any("wait for the button" in i.value for i in at.info)
    at.button(key="explain_costly").click().run()
    assert_clean(at)
    assert at.selectbox(key="explain_csv_method").options == [title(m) for m in with_views(METHODS)]
    at.run()  # a rerun (any click elsewhere) keeps them, without the button
    assert not [b for b in at.button if b.key == "explain_costly"]
    assert at.selectbox(key="explain_csv_method").options == [title(m) for m in with_views(METHODS)]
    at.get("button_group")[-1].set_value("sanity").run()
    assert any(b.label == f"Run the randomization check ({len(cheap)} methods)" for b in at.button)
    at.get("button_group")[-1].set_value("alignment").run()
    at.button(key="explain_aer_run").click().run()
    assert_clean(at)
    rows = at.dataframe[-1].value.set_index("alignment from")["sentences"]
    methods = rows[~rows.index.str.startswith("cross-attention")]
    assert set(methods.index) == {label(m) for m in with_views(cheap)} and set(methods) == {50}
    assert set(rows[rows.index.str.startswith("cross-attention")]) == {200}  # the heads: one forward, every sentence
    assert any("too slow at this model's size" in c.value for c in at.caption)


def test_ig_convergence_is_each_rows_delta_against_its_own_gap() -> None:
    from ui.compute.explain import Explanation

    ig = np.array([[1.0, 0.5, 0.5], [0.2, 0.0, -0.2], [0.1, 0.0, 0.0]])  # (rows, S): sums 2.0, 0.0, 0.1
    delta = np.array([0.05, 0.01, 0.02])
    result = Explanation(["a", "b", "</s>"], ["b", "a", "</s>"], {"integrated_gradients": ig}, {}, delta)
    table = result.ig_convergence()
    np.testing.assert_allclose(table["f(x) − f(x′)"], [1.95, -0.01, 0.08])  # Σ attribution − delta, row by row
    np.testing.assert_allclose(table["|delta| / |gap|"], [0.05 / 1.95, 1.0, 0.25])
    # 5% of its own gap, plus the 0.001 floor: row 1's tiny gap is not enough for its 0.01, nor row 2's 0.08 for 0.02
    assert list(table["within tolerance"]) == [True, False, False]
    gapless = Explanation(["a"], ["b"], {"integrated_gradients": np.array([[0.5]])}, {}, np.array([0.5]))
    assert np.isnan(gapless.ig_convergence()["|delta| / |gap|"][0])  # no gap, no ratio (the chart: "undefined")
    assert Explanation(["a"], ["b"], {"attention": np.array([[1.0]])}, {}).ig_convergence() is None


def test_the_page_shows_integrated_gradients_convergence_per_row(models_dir: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_explain("abc12")
    assert_clean(at)
    bars = keyed_figure(at, "explain_ig_delta").data[0]
    assert len(values(bars.y)) == len(at.get("button_group")[0].proto.options)  # one bar per output token
    assert any("of f(x) − f(x′)" in c.value and "within tolerance" in c.value for c in at.caption)
    assert not at.warning
    from ui.compute import explain as compute

    monkeypatch.setattr(compute, "within_tolerance", lambda delta, gap: np.zeros(len(delta), dtype=bool))
    at.run()  # a row still off after the last level is flagged in the caption, a warning and red bars
    assert any("above the tolerance" in c.value for c in at.caption)
    assert any("has not converged" in w.value for w in at.warning)
    assert set(keyed_figure(at, "explain_ig_delta").data[0].marker.color) == {"#ef553b"}


def test_the_page_says_which_methods_agree_with_the_truth() -> None:
    from ui.compute.explain import agreeing_with_truth

    accuracy = pd.DataFrame({"method": ["saliency", "attention", "integrated_gradients"],
                             "top source token is a true one": [0.17, 0.92, 0.0]})
    said = agreeing_with_truth(accuracy)
    assert said == ("Agree with the true alignment on this input: attention (92%). "
                    "Do not: saliency (17%), integrated gradients (0%).")


def test_aer_table_is_best_first() -> None:
    from ui.compute.explain_alignment import AlignmentScores, aer_table

    scores = AlignmentScores({"attention": (0.3, 10), "saliency": (0.1, 5), "occlusion": (float("nan"), 5)},
                             {(0, 0, False): 0.2, (0, 0, True): 0.05}, 10, {})
    table = aer_table(scores)
    assert list(table["alignment from"]) == ["saliency", "cross-attention layer 0 head 0", "attention", "occlusion"]
    assert list(table["sentences"]) == [5, 10, 10, 5]
    shifted = aer_table(scores, shift=True)
    assert shifted["alignment from"][0] == "cross-attention layer 0 head 0 (Shift-Att)"


def test_a_words_undefined_rows_leave_the_aer_on_both_sides() -> None:
    from ui.compute.explain_alignment import GoldSet, _aer

    gold = GoldSet(((5, 6, 3),), ((2, 6, 5, 3),), ((0, 1, -1),), ((0, 1, -1),), (frozenset({(1, 0), (0, 1)}),),
                   (frozenset(),), "k")
    links = {0: {(1, 0)}}  # target word 1's row was undefined: no link from it
    assert _aer(gold, links) == pytest.approx(1 - 2 / 3)  # counted as a miss
    assert _aer(gold, links, {0: {1}}) == 0.0  # left out: its gold link (0, 1) too


def test_the_compare_model_is_explained_with_the_same_methods_and_baseline(
        models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The "Compare with" model's bars answer the same question as the first model's: the same methods and the
    same integrated-gradients baseline; a costly method waits for its button where only that model is large."""
    import ui.compute.explain
    import ui.compute.model_size
    from transformer.pipeline import load_pretrained
    from ui.sections import compare

    calls: list[tuple[str, tuple[str, ...], str]] = []
    real = ui.compute.explain.explain

    def spy(model_key, device, pipeline, analysis, methods=METHODS, baseline="zero"):
        calls.append((model_key, tuple(methods), baseline))
        return real(model_key, device, pipeline, analysis, methods, baseline)

    monkeypatch.setattr(ui.compute.explain, "explain", spy)
    at = open_explain("12", explain_ig_baseline="pad", **{compare.COMPARE: "tiny-numbers"})
    assert_clean(at)
    first, second = calls[0], calls[-1]
    assert "tiny-numbers" in second[0] and "tiny-numbers" not in first[0]
    assert second[1:] == first[1:] == (METHODS, "pad")
    assert at.get("plotly_chart")[1].proto.spec  # the compare model's bars are drawn
    sizes = {name: load_pretrained(models_dir / name).model.num_parameters()
             for name in ("tiny-reverse", "tiny-numbers")}
    assert sizes["tiny-numbers"] > sizes["tiny-reverse"]
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", sizes["tiny-reverse"])  # only the compared one is large
    calls.clear()
    at = open_explain("12", explain_ig_baseline="unk", **{compare.COMPARE: "tiny-numbers"})
    assert_clean(at)
    costly = set(ui.compute.explain.deferred(load_pretrained(models_dir / "tiny-numbers")))
    assert costly and calls[0][1] == METHODS
    assert calls[-1][1:] == (tuple(m for m in METHODS if m not in costly), "unk")


@pytest.mark.parametrize("uploads", ["", "1"])
def test_public_mode_offers_the_sentence_and_link_uploads_only_when_allowed(monkeypatch: pytest.MonkeyPatch,
                                                                          marian_dir: Path, uploads: str) -> None:
    """Public mode without $TRANSFORMER_APP_PUBLIC_UPLOADS: no .txt of sentences or references (the Heads page's
    widgets, drawn here by the AER section) and no Pharaoh file; the text boxes stay."""
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.PUBLIC_UPLOADS_ENV, uploads)
    at = open_upload(monkeypatch, marian_dir, "0-1 1-0\n0-0\n")
    assert_clean(at)
    keys = {u.key for u in at.get("file_uploader")}
    wanted = {"explain_aer_sources_file", "explain_aer_references_file", "explain_aer_gold_file"}
    assert (keys & wanted == wanted) if uploads else not keys & wanted, keys
    assert [b for b in at.button if b.key == "explain_aer_run"]  # the typed sentences and links still work
