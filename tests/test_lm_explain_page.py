"""The Explain page on a decoder-only language model (issue 41 item 5): each generated token of the prompt's greedy
continuation explained by the prompt (source) and by the tokens generated before it (target), with every method of
the registry, the logit lens, the residual stream and faithfulness.

The page's numbers are held against the package called directly on the same prompt and a continuation decoded here
on its own (``lm_greedy``): ``attribute(model, *lm_pair(prompt, continuation), method)``, ``logit_lens_top``,
``residual_stream``, ``faithfulness`` with the tokenizer's special ids. The folders are ``lm_folders``' GPT-2
(learned positions, its EOS also its pad id), Qwen3 (RoPE, q/k norms) and Gemma-2 (a BOS in every prompt, sandwich
norms, soft-caps, sliding windows). The page is driven through a stand-in sidebar (tests/lm_app_standin.py) until
h-lmapp1's loading lands.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io
import pytest
import torch
from lm_app_standin import N_NEW, lm_analysis, open_lm_page
from lm_folders import build_lm_folder

from transformer import load_pretrained
from transformer.decoding.lm import lm_greedy
from transformer.explain import (
    LAYER_VIEW_METHODS,
    METHODS,
    REGISTRY,
    Attribution,
    attribute,
    faithfulness,
    faithfulness_summary,
    lm_pair,
    logit_lens_top,
    residual_stream,
)
from ui.charts import lm_explain as charts
from ui.compute import explain, lm_explain
from ui.compute import faithfulness as compute_faithfulness
from ui.sections import lm_explain as section

PAGE = str(Path(__file__).resolve().parent.parent / "pages" / "5_explain.py")
FAMILIES = ("gpt2", "qwen3", "gemma2")
PROMPT = "Hello world, this is"


@pytest.fixture(scope="module")
def pipes(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("lm-explain-page")
    return {name: load_pretrained(build_lm_folder(name, root)) for name in FAMILIES}


def package_pair(pipe) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """The prompt's ids as its tokenizer gives them and its greedy continuation decoded here (not through the
    app), as ``lm_pair`` takes them."""
    prompt = torch.tensor([pipe.tokenizer.encode(PROMPT)])
    steps = lm_greedy(pipe.model, prompt, max_new_tokens=N_NEW, eos_id=list(pipe.eos_ids))
    assert not steps.finished[0], "the test's continuations run to their bound (random weights)"
    return lm_pair(prompt, torch.tensor([steps.tokens[0]]))


def page_explanation(pipe, name: str) -> explain.Explanation:  # noqa: ANN001
    return explain.explain(f"lm-explain-{name}", "cpu", pipe, lm_analysis(pipe, PROMPT), METHODS)


@pytest.mark.parametrize("name", FAMILIES)
def test_every_map_is_the_packages_attribute_on_lm_pair(pipes, name: str) -> None:
    pipe = pipes[name]
    src, tgt = package_pair(pipe)
    result = page_explanation(pipe, name)
    assert result.decoder_only and not result.errors and not result.notes
    assert result.src_tokens == pipe.tokenizer.display_pieces(src[0].tolist())  # readable byte-level pieces
    assert result.out_tokens == pipe.tokenizer.display_pieces(tgt[0, 1:].tolist())
    assert result.lens_positions == pipe.tokenizer.display_pieces(tgt[0, :-1].tolist())  # the prompt's last token,
    last = pipe.config.n_decoder_layers - 1  # then c_1 .. c_{n-1}
    assert list(result.source) == [k for m in METHODS for k in
                                   ([m, explain.layer_view(m, last)] if m in LAYER_VIEW_METHODS else [m])]
    for key in result.source:
        method, layer = explain.split_view(key)
        options = {"layer": layer} if layer is not None else {}
        if REGISTRY[method].baseline:
            options["baseline"] = explain.used_baseline(pipe, "default")
        expected = attribute(pipe.model, src, tgt, method, **options)
        # the same call on the same ids, model and thread count: the same floats, bit for bit
        np.testing.assert_array_equal(result.source[key], expected.source[0].numpy(), err_msg=key)
        if REGISTRY[method].target:
            np.testing.assert_array_equal(result.target[key], expected.target[0].numpy(), err_msg=key)
        else:
            assert expected.target is None and key not in result.target
    assert result.ig_baseline == ("zero" if name == "gpt2" else "pad")  # rotary: singular at zero embeddings


@pytest.mark.parametrize("name", FAMILIES)
def test_the_lens_and_the_residual_stream_are_the_packages(pipes, name: str) -> None:
    pipe = pipes[name]
    src, tgt = package_pair(pipe)
    analysis = lm_analysis(pipe, PROMPT)
    pieces, log_probs = explain.lens(f"lm-explain-{name}", "cpu", pipe, analysis)
    ids, expected = logit_lens_top(pipe.model, src, tgt)
    np.testing.assert_array_equal(log_probs, expected[:, 0].numpy())
    assert pieces.tolist() == [pipe.tokenizer.display_pieces(row) for row in ids[:, 0].tolist()]
    assert pieces.shape == (pipe.config.n_decoder_layers, N_NEW)
    stream = explain.residual(f"lm-explain-{name}", "cpu", pipe, analysis)
    pd.testing.assert_frame_equal(stream, residual_stream(pipe.model, src, tgt))
    assert set(stream["stack"]) == {"decoder"} and stream["position"].max() == src.size(1) + N_NEW - 2


@pytest.mark.parametrize("name", ["gpt2", "gemma2"])
def test_faithfulness_never_removes_the_tokenizers_special_tokens(pipes, name: str) -> None:
    pipe = pipes[name]
    src, tgt = package_pair(pipe)
    result = page_explanation(pipe, name)
    frame, errors = compute_faithfulness.measures(f"lm-explain-{name}", "cpu", pipe, lm_analysis(pipe, PROMPT),
                                                  result, "default")
    assert not errors and set(frame.key) == set(result.source)
    special = torch.isin(src, torch.tensor(sorted(pipe.tokenizer.special_ids)))
    assert int(special.sum()) == (1 if name == "gemma2" else 0)  # Gemma's prompt begins with <bos>
    for key in ("attention", "occlusion"):
        attribution = Attribution(key, torch.from_numpy(result.source[key])[None], options={})
        table = faithfulness(pipe.model, src, tgt, attribution, special=special)
        assert (table.n == src.size(1) - int(special.sum())).all()  # the removable tokens: every other one
        expected = faithfulness_summary(table)
        got = frame[frame.key == key].drop(columns=["key", "map", "removal"]).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected.reset_index(drop=True), check_dtype=False)


def fake_analysis(prompt: list[int], generated: list[int], end: int | None) -> SimpleNamespace:
    """An analysis as a language model's trace gives it, ended by ``end`` (None: cut at the bound)."""
    said = [*generated, *([end] if end is not None else [])]
    steps = SimpleNamespace(ids=torch.tensor([[*prompt, *said]]))
    result = SimpleNamespace(src_ids=prompt, output_ids=generated, finished=end is not None, steps=steps)
    return SimpleNamespace(trace={"tgt.ids": None}, result=result)


def test_the_end_token_is_explained_unless_it_is_the_pad_id() -> None:
    """The end token the model said is a row ("why stop here?"), except where the explanations would read it as
    padding (GPT-2: EOS = pad) and write its row as 0."""
    ids = explain.explained_ids(fake_analysis([5, 6, 7], [8, 9], end=402), pad_id=400)  # Qwen3: EOS 402, pad 400
    assert [t.tolist() for t in ids] == [[[5, 6, 7]], [[7, 8, 9, 402]]]
    gpt2 = fake_analysis([5, 6, 7], [8, 9], end=400)  # GPT-2: <|endoftext|> is EOS and pad
    assert [t.tolist() for t in explain.explained_ids(gpt2, pad_id=400)] == [[[5, 6, 7]], [[7, 8, 9]]]
    assert lm_explain.end_left_out(gpt2, 400) and not lm_explain.end_left_out(gpt2, 0)
    cut = fake_analysis([5, 6, 7], [8, 9], end=None)
    assert [t.tolist() for t in explain.explained_ids(cut, pad_id=9)] == [[[5, 6, 7]], [[7, 8, 9]]]


def test_the_joint_map_holds_the_prompt_then_the_earlier_tokens_and_names_every_blank() -> None:
    source = np.arange(12.0).reshape(3, 4)  # 3 rows, a prompt of 4
    target = np.arange(100.0, 109.0).reshape(3, 3)
    joint = charts.joint_matrix(source, target)
    np.testing.assert_array_equal(joint[:, :4], source)
    assert np.isnan(joint[0, 4:]).all() and joint[1, 4] == target[1, 1] and np.isnan(joint[1, 5])
    assert list(joint[2, 4:]) == [target[2, 1], target[2, 2]]  # row 2 reads c_1 and c_2
    notes = charts.cell_notes(source, target)
    assert notes[0, 4] == charts.NOT_READ and notes[2, 5] == "" and notes[0, 0] == ""
    prompt_only = charts.joint_matrix(source, None)
    assert np.isnan(prompt_only[:, 4:]).all()
    assert set(charts.cell_notes(source, None)[:, 4:].ravel()) == {charts.NOT_SCORED}
    undefined = source.copy()
    undefined[1] = np.nan
    assert np.isnan(charts.joint_matrix(undefined, target)[1]).all()
    assert set(charts.cell_notes(undefined, target)[1]) == {charts.UNDEFINED}
    z = charts.normalise_cells(joint)
    np.testing.assert_allclose(z[2], joint[2] / 108.0)  # ÷ the row's largest |value|, prompt and continuation
    assert np.isnan(z[0, 4:]).all()


def test_the_charts_draw_the_maps_and_never_a_number_where_there_is_none(pipes) -> None:
    result = page_explanation(pipes["qwen3"], "qwen3")
    rows, p = result.out_tokens, len(result.src_tokens)
    fig = charts.lm_row_bars(result.source, result.target, result.src_tokens, rows, 3)
    bars = {trace.name: np.asarray(trace.y, dtype=float) for trace in fig.data}
    joint = charts.joint_matrix(result.source["alti"], result.target["alti"])[3, :p + 3]
    np.testing.assert_allclose(bars["alti"], joint / np.abs(joint).max())
    assert np.isnan(bars["occlusion: prompt only"][p:]).all() and len(bars["occlusion: prompt only"]) == p + 3
    assert fig.layout.xaxis.title.text == charts.COLUMNS
    grid = charts.lm_method_grid(result.source, result.target, result.src_tokens, rows)
    heat = {grid.layout.annotations[i].text: trace for i, trace in enumerate(grid.data)}
    norm = heat["norm"]
    assert np.isnan(np.asarray(norm.z, dtype=float)[:, p:]).all()
    assert {cell for line in norm.text for cell in line[p:]} == {charts.NOT_SCORED}
    assert heat["rollout"].text[0][p] == charts.NOT_READ and heat["rollout"].text[1][p] != charts.NOT_READ
    frame = charts.lm_row_frame(result.source, result.target, result.src_tokens, rows, 3)
    occlusion = list(result.source).index("occlusion")
    assert frame.shape == (len(result.source), p + 3) and frame.iloc[occlusion, p:].isna().all()
    np.testing.assert_array_equal(frame.iloc[occlusion, :p], result.source["occlusion"][3])  # unnormalised


def test_the_prompt_only_methods_are_the_registrys() -> None:
    result = explain.Explanation(["a"], ["b"], {m: np.zeros((1, 1)) for m in METHODS}, {})
    assert section.prompt_only(result) == [m for m in METHODS if not REGISTRY[m].target]
    assert set(section.prompt_only(result)) == {"norm", "integrated_gradients", "occlusion"}


# --- the page --------------------------------------------------------------------------------------------------


def figure(at, key: str) -> go.Figure:  # noqa: ANN001
    found = [c for c in at.get("plotly_chart") if c.proto.id.endswith(key) or key in c.proto.id]
    return plotly.io.from_json(found[0].proto.spec)


def assert_clean(at) -> None:  # noqa: ANN001
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("name", FAMILIES)
def test_the_page_explains_a_continuation_in_a_language_models_words(monkeypatch, pipes, name: str) -> None:
    pipe = pipes[name]
    at = open_lm_page(monkeypatch, PAGE, pipe, f"lm-page-{name}", PROMPT)
    assert_clean(at)
    assert at.title[0].value == section.TITLE
    assert at.subheader[0].value.startswith("Which prompt tokens and earlier generated tokens made")
    words = " ".join(m.value for m in [*at.markdown, *at.caption])
    assert "**Continuation:**" in words and section.NOT_SHOWN in words and "prompt only" in words
    for translation_word in ("source sentence", "**Translation:**", "output token to explain"):
        assert translation_word not in words
    pills = at.get("button_group")[0].proto.options
    prompt = pipe.tokenizer.display_pieces(pipe.tokenizer.encode(PROMPT))
    first = pills[0].content if hasattr(pills[0], "content") else str(pills[0])
    assert first.startswith(f"{prompt[-1]} →")  # the prompt's last token predicts the first generated one
    assert not at.info  # every method ran
    more = at.get("button_group")[-1]
    assert [o.content for o in more.proto.options] == list(section.MORE.values())


def test_every_section_and_method_renders(monkeypatch, pipes) -> None:
    """The sections beyond one token (agreement, ALTI+'s prompt share, faithfulness, the logit lens, the residual
    stream) and each method family's matrix, on Gemma-2 (every switch at once)."""
    at = open_lm_page(monkeypatch, PAGE, pipes["gemma2"], "lm-page-sections", PROMPT)
    assert_clean(at)
    words = " ".join(c.value for c in at.caption)
    assert "No accuracy against a true alignment: a prompt and its continuation have no true word alignment" in words
    for more, title in (("source", "Prompt or continuation"), ("faithfulness", "Faithfulness"),
                        ("lens", "The logit lens"), ("residual", "The residual stream")):
        at.get("button_group")[-1].set_value(more).run()
        assert_clean(at)
        assert at.subheader[-1].value.startswith(title), more
    assert figure(at, "explain_residual").layout.xaxis.ticktext[0] == "&lt;bos&gt;"
    at.get("button_group")[-1].set_value("sanity").run()  # the randomization check, at its button
    at.button(key="explain_sanity_run").click().run()
    assert_clean(at)
    assert at.subheader[-1].value.startswith("Sanity check") and figure(at, "explain_sanity") is not None
    for method in ("attention", "saliency", "integrated_gradients", "occlusion", "alti", "value_zeroing"):
        at.selectbox(key="explain_csv_method").set_value(method).run()
        assert_clean(at)
    at.get("button_group")[0].set_value(1).run()  # another generated token (AppTest picks a pill by its label:
    assert_clean(at)  # this random model's later tokens repeat, and so do their labels)
    assert at.session_state["explain_row"] == 1 and at.query_params["token"] == "1"


def test_on_a_large_model_the_costly_methods_wait_for_the_button_and_run_as_shared_work(monkeypatch, pipes) -> None:
    pooled = []
    real = explain.shared_or_cut

    def recording(name, key, work, **options):  # noqa: ANN001, ANN202
        pooled.append(key[3])
        return real(name, key, work, **options)

    monkeypatch.setattr(explain, "is_large", lambda _: True)
    monkeypatch.setattr(compute_faithfulness, "is_large", lambda _: True)
    monkeypatch.setattr(explain, "shared_or_cut", recording)
    at = open_lm_page(monkeypatch, PAGE, pipes["gpt2"], "lm-page-large", PROMPT)
    assert_clean(at)
    cheap = [m for m in METHODS if not explain.costly(m)]
    assert "wait for the button" in " ".join(i.value for i in at.info) and not pooled
    assert set(at.selectbox(key="explain_csv_method").options) == {explain.title(k) for m in cheap for k in
                                                                    ([m, explain.layer_view(m, 2)]
                                                                     if m in LAYER_VIEW_METHODS else [m])}
    at.button(key="explain_costly").click().run()
    assert_clean(at)
    costly = [m for m in METHODS if explain.costly(m)]
    assert sorted(set(pooled)) == sorted({*costly, explain.layer_view("value_zeroing", 2)})
    at.get("button_group")[-1].set_value("faithfulness").run()
    assert_clean(at)
    assert at.button(key="explain_faithfulness_run")  # faithfulness waits for its own button


def test_compare_with_another_language_model_or_a_translation_model(monkeypatch, pipes, tiny_pipeline) -> None:
    from ui.sections.compare import Second

    gpt2 = Second("tiny gpt2", "lm-compare-gpt2", pipes["gpt2"], "tiny GPT-2", "gpt2")
    at = open_lm_page(monkeypatch, PAGE, pipes["qwen3"], "lm-compare-qwen3", PROMPT, second=gpt2)
    assert_clean(at)
    assert "**Beside it: tiny GPT-2** (its own continuation of the same prompt)" in [m.value for m in at.markdown]
    beside = figure(at, "explain_rowchart_2")
    assert beside.layout.xaxis.ticktext[0] == "H" and beside.layout.xaxis.title.text == charts.COLUMNS
    marian = Second("tiny reverse", "lm-compare-reverse", tiny_pipeline, "tiny reverse", "")
    at = open_lm_page(monkeypatch, PAGE, pipes["qwen3"], "lm-compare-qwen3", PROMPT, second=marian)
    assert_clean(at)
    assert "tiny reverse is a translation model: it explains a translation, not this continuation." in [
        c.value for c in at.caption]


def test_the_explain_page_opens_a_decoder_only_folder_from_the_model_menu(tmp_path, monkeypatch) -> None:
    """Through app.py and the real sidebar and analysis (the other tests drive the page through
    tests/lm_app_standin.py, with shorter continuations)."""
    import app_helpers

    from ui.state import settings

    build_lm_folder("qwen3", tmp_path)
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path))
    at = app_helpers.open_page("5_explain", PROMPT, "qwen3", timeout=300)
    assert_clean(at)
    assert at.title[0].value == section.TITLE
    assert at.subheader[0].value.startswith("Which prompt tokens and earlier generated tokens made")
    assert not at.info  # every method ran
