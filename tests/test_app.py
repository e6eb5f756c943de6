"""The Streamlit app under streamlit.testing's AppTest, on the tiny checkpoints of conftest.py.

Pages are opened as a user does: run app.py (which routes to the first page), then
``switch_page``. Under AppTest a page of a pages/ folder runs without app.py, which is why
every page draws the shared sidebar itself (see ui/sections/sidebar.py).
"""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from app_helpers import assert_clean
from app_helpers import open_page as open_app
from streamlit.testing.v1 import AppTest

from ui.models import uploads
from ui.state import settings

APP = str(Path(__file__).resolve().parent.parent / "app.py")
TITLES = {"1_model": "The model", "2_tokenization": "Tokenization",
          "3_embeddings": "Embeddings and positional encoding", "4_attention": "Attention", "8_masks": "Masks"}
PAGES = list(TITLES)
TIMEOUT = 60


@pytest.fixture
def models_dir(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    return tiny_models_dir


def zip_bytes(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def zip_folder(folder: Path, prefix: str = "") -> bytes:
    return zip_bytes({prefix + p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()})


# --- every page -----------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_with_its_sidebar(models_dir: Path, page: str) -> None:
    at = open_app(page, text="abc12")
    assert_clean(at)
    assert at.title[0].value == TITLES[page]
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).value == "tiny-reverse"
    assert at.sidebar.text_input(key=settings.TEXT_WIDGET).value == "abc12"
    assert at.get("plotly_chart") or page == "2_tokenization"
    assert at.get("download_button"), "the numbers behind the charts can be downloaded"


def test_first_page_and_model_switch(models_dir: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()  # the first model of the folder, by name
    assert_clean(at)
    assert at.title[0].value == "The model"
    diagrams = [m.value for m in at.markdown if "architecture-diagram" in m.value]
    assert len(diagrams) == 1 and "Self-attention: 4" in diagrams[0]  # tiny-numbers has 4 heads; drawn once
    assert at.get("plotly_chart")[0].proto.spec  # the parameter chart, in its placeholder's place
    assert not at.metric, "the comparison with torch.nn.Transformer runs only when asked (start-up time)"
    at.button(key="model_parity_run").click().run()
    assert_clean(at)
    assert float(at.metric[0].value) < 1e-4  # largest |difference| to torch.nn.Transformer
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).options == ["tiny-numbers", "tiny-reverse"]
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value("tiny-reverse").run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "tiny-reverse"
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value("tiny-numbers").run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "tiny-numbers"
    examples = at.sidebar.selectbox(key=settings.EXAMPLE_WIDGET).options
    assert at.sidebar.text_input(key=settings.TEXT_WIDGET).value == examples[len(examples) // 2]  # follows the model
    assert float(at.metric[0].value) < 1e-4, "once asked, the comparison follows the model"
    at.switch_page("pages/4_attention.py").run()
    assert_clean(at)
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).value == "tiny-numbers"  # the choice carries over
    assert at.selectbox(key="attn_head").options[-1] == "average of all heads"  # the label shown
    assert len(at.selectbox(key="attn_head").options) == 4 + 1


def test_example_sentence_and_device(models_dir: Path) -> None:
    at = open_app("3_embeddings")
    examples = at.sidebar.selectbox(key=settings.EXAMPLE_WIDGET)
    example = examples.options[-1]
    examples.set_value(example).run()
    assert_clean(at)
    assert at.sidebar.text_input(key=settings.TEXT_WIDGET).value == example
    assert at.session_state[settings.TEXT] == example
    assert "cpu" in at.sidebar.selectbox(key=settings.DEVICE_WIDGET).options
    at.switch_page("pages/2_tokenization.py").run()
    assert at.sidebar.text_input(key=settings.TEXT_WIDGET).value == example  # shared by the pages


def test_the_sidebar_says_what_a_users_own_input_should_give_or_why_it_cannot(models_dir: Path) -> None:
    """Issue 45: "Expected output" disappeared as soon as the input was not an example. Now the sidebar gives the
    task's own answer for any input, or why there is none."""
    at = open_app("3_embeddings", text="zz9ab")  # tiny-reverse, an input of the user's own
    assert_clean(at)
    assert "Expected output: ba9zz" in [c.value for c in at.sidebar.caption]
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value("tiny-numbers").run()
    at.sidebar.text_input(key=settings.TEXT_WIDGET).set_value("forty-seven").run()
    assert "Expected output: siebenundvierzig" in [c.value for c in at.sidebar.caption]
    at.sidebar.text_input(key=settings.TEXT_WIDGET).set_value("forty-sevn").run()
    assert any(c.value.startswith("No expected output: 'forty-sevn' is not a number") for c in at.sidebar.caption)


@pytest.mark.parametrize("page", PAGES)
def test_empty_input_warns(models_dir: Path, page: str) -> None:
    at = open_app(page, text="   ")
    if page == "1_model":  # the only use of the input there is the comparison with torch.nn.Transformer
        at.button(key="model_parity_run").click().run()
    assert_clean(at)
    assert any("empty" in w.value for w in at.warning)


def test_unknown_characters_warn(models_dir: Path) -> None:
    at = open_app("4_attention", text="ABC€")
    assert_clean(at)
    assert any("<unk>" in w.value for w in at.warning)


# --- page widgets -----------------------------------------------------------------------------------


def test_a_large_models_head_grid_waits_for_its_toggle(models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ui.compute.model_size

    at = open_app("4_attention", text="abc12")
    assert "attn_grid_on" not in [t.key for t in at.toggle]
    assert len(at.get("plotly_chart")) == 3  # a small model: the grid at once
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)  # every model is large
    at.run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2 and "attn_grid_on" in [t.key for t in at.toggle]
    at.toggle(key="attn_grid_on").set_value(True).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3 and "all layers x heads" in at.get("plotly_chart")[2].proto.spec


def test_attention_widgets_and_ablation(models_dir: Path) -> None:
    at = open_app("4_attention", text="abc12")
    for kind in ("decoder", "cross", "encoder"):
        at.radio(key="attn_kind").set_value(kind).run()
        assert_clean(at)
    at.selectbox(key="attn_layer").set_value(1).run()
    at.selectbox(key="attn_head").set_value(1).run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3  # weights, the head view's lines, the grid
    at.radio(key="attn_view").set_value("scores").run()
    assert len(at.get("plotly_chart")) == 3  # weights, scores, the grid
    at.radio(key="attn_view").set_value("row").run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3  # weights, the selected query's row as bars, the grid
    assert "Attention of query" in at.get("plotly_chart")[1].proto.spec
    at.selectbox(key="attn_head").set_value("average").run()
    assert_clean(at)
    at.radio(key="attn_view").set_value("scores").run()
    assert any("pick a head" in i.value for i in at.info)
    at.radio(key="attn_view").set_value("lines").run()  # every head's lines at once
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3
    at.selectbox(key="attn_query").set_value(2).run()
    assert_clean(at)
    at.multiselect(key="attn_ablate").select("cross L0 H1").select("cross L1 H0").run()
    assert_clean(at)
    shown = " ".join(m.value for m in at.markdown)
    assert "With the chosen heads off" in shown and "Translation with every head" in shown  # both in full
    assert at.dataframe, "the table of logit changes"


def test_masks_page_batch_and_kinds(models_dir: Path) -> None:
    at = open_app("8_masks", text="abc")
    at.text_area(key="mask_batch").set_value("abcdefgh\nab\n\nabcd").run()
    assert_clean(at)
    assert len(at.selectbox(key="mask_row").options) == 3
    at.selectbox(key="mask_row").set_value(1).run()
    for kind in ("decoder", "cross"):
        at.radio(key="mask_kind").set_value(kind).run()
        assert_clean(at)
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["largest weight on a masked cell"] == "0"
        assert int(metrics["masked cells"]) > 0
    assert not any("shortened" in i.value for i in at.info)
    at.text_area(key="mask_batch").set_value("ab\n" + "abcdefghij" * 200).run()  # a 2,000-character line
    assert_clean(at)
    assert any("Line 2 had more tokens" in i.value and "shortened" in i.value for i in at.info)
    at.text_area(key="mask_batch").set_value("  \n").run()
    assert_clean(at)
    assert any("at least one sentence" in w.value for w in at.warning)


def test_the_masks_page_opens_where_a_mask_masks() -> None:
    """Issue 45: on dates-de the three default inputs have the same length (ISO dates, 10 characters), so the
    source padding mask is empty and the encoder view the page opened on read "masked cells 0". The page says so
    and opens on the decoder's self-attention, whose causal mask always masks."""
    at = open_app("8_masks", "2090-01-07", "dates-de")  # the shipped model
    assert not at.exception and not at.error
    assert at.radio(key="mask_kind").value == "decoder"
    masked = next(m for m in at.metric if m.label == "masked cells")
    assert int(masked.value) > 0
    assert any("source padding mask is empty" in c.value for c in at.caption)


def test_tokenization_retrains_another_tokenizer(models_dir: Path) -> None:
    at = open_app("2_tokenization", text="abc12")
    assert any("token-chip" in m.value for m in at.markdown)
    vocab = [d.value for d in at.dataframe if "score" in d.value.columns][0]
    assert len(vocab) == 40 and "tok_side" not in [r.key for r in at.radio]  # tiny-reverse: one shared vocabulary
    at.text_input(key="tok_search").set_value("b").run()
    assert_clean(at)
    found = [d.value for d in at.dataframe if "score" in d.value.columns][0]
    assert list(found["piece"]) == ["b"] and list(found["id"]) == list(vocab.loc[vocab["piece"] == "b", "id"])
    at.selectbox(key="tok_kind").set_value("char").run()
    assert_clean(at)
    comparison = [d.value for d in at.dataframe if "tokenizer" in d.value.columns][0]
    assert list(comparison["pieces"]) == [6, 6]  # both 5 characters + </s>: counted the same way now
    at.selectbox(key="tok_kind").set_value("bpe").run()
    at.slider(key="tok_vocab_size").set_value(60).run()
    assert_clean(at)


def test_tokenization_lists_each_side_of_separate_vocabularies(models_dir: Path) -> None:
    from transformer import load_pretrained

    pipe = load_pretrained(models_dir / "tiny-numbers")  # separate source and target vocabularies
    at = open_app("2_tokenization", text="seven", model="tiny-numbers")
    at.radio(key="tok_side").set_value("target").run()
    assert_clean(at)
    shown = [d.value for d in at.dataframe if "score" in d.value.columns][0]
    expected = pipe.tgt_tokenizer.vocab()
    assert list(shown["id"]) == list(expected["id"]) and list(shown["score"]) == list(expected["score"])
    assert not expected.equals(pipe.src_tokenizer.vocab())


def test_embeddings_widgets(models_dir: Path) -> None:
    at = open_app("3_embeddings", text="abc")
    at.radio(key="emb_side").set_value("target (decoder input)").run()
    at.slider(key="emb_positions").set_value(10).run()
    assert_clean(at)
    at.multiselect(key="emb_dims").set_value([]).run()
    assert_clean(at)
    assert any("at least one dimension" in i.value for i in at.info)


# --- models from elsewhere: none, uploaded, trained in this session ------------------------------


def test_no_model_is_a_message_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path / "empty"))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("No model is available" in i.value for i in at.info)
    assert not at.get("plotly_chart"), "no placeholder is left where the parameter chart would be"
    assert not [m for m in at.markdown if "architecture-diagram" in m.value], "nor a diagram"


def test_damaged_checkpoint_is_a_message(tiny_checkpoint: Path, tmp_path: Path, monkeypatch) -> None:
    import shutil

    shutil.copytree(tiny_checkpoint, tmp_path / "damaged")
    weights = tmp_path / "damaged" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # cut short, as by a failed copy
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert any("Cannot load damaged" in e.value for e in at.sidebar.error)
    assert any("could not be loaded" in e.value for e in at.error)


def test_upload_a_zipped_checkpoint(models_dir: Path, tmp_path: Path) -> None:
    at = open_app("4_attention")
    uploader = at.sidebar.get("file_uploader")[0]
    assert uploader.proto.max_upload_size_mb == settings.MAX_UPLOAD_BYTES // 2**20  # the browser says the cap
    uploader.upload("my-model.zip", zip_folder(models_dir / "tiny-numbers", prefix="my-model/"),
                    "application/zip").run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "my-model (uploaded)"
    assert "my-model (uploaded)" in at.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    assert at.title[0].value == "Attention"


def test_broken_uploads_show_an_error(models_dir: Path) -> None:
    at = open_app("3_embeddings")
    for content, message in [
        (b"this is not a zip", "not a zip"),
        (zip_bytes({"../evil.txt": b"x"}), "unsafe path"),
        (zip_bytes({"readme.txt": b"x"}), "config.json and model.safetensors"),
        (zip_bytes({"config.json": b"{", "model.safetensors": b"junk"}), "not readable JSON"),
    ]:
        at.sidebar.get("file_uploader")[0].set_value(("bad.zip", content, "application/zip")).run()
        assert not at.exception
        errors = [e.value for e in at.sidebar.error]
        assert len(errors) == 1 and message in errors[0], errors
        assert at.session_state[settings.MODEL] == "tiny-reverse"  # the current model is kept
        assert at.title[0].value == TITLES["3_embeddings"]


def test_extract_checkpoint_zip_is_safe(tiny_checkpoint: Path, tmp_path: Path, monkeypatch) -> None:
    folder = uploads.extract_checkpoint_zip(zip_folder(tiny_checkpoint), tmp_path / "flat")
    assert folder == (tmp_path / "flat").resolve() and (folder / "config.json").is_file()
    nested = uploads.extract_checkpoint_zip(zip_folder(tiny_checkpoint, "a/b/"), tmp_path / "nested")
    assert nested == (tmp_path / "nested" / "a" / "b").resolve()
    for name in ("/etc/evil", "a/../../evil", "..\\evil"):
        with pytest.raises(uploads.UploadError, match="unsafe path"):
            uploads.extract_checkpoint_zip(zip_bytes({name: b"x"}), tmp_path / "slip")
    assert not (tmp_path / "evil").exists()
    link = zipfile.ZipInfo("link")
    link.external_attr = 0o120777 << 16
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(link, "/etc/passwd")
    with pytest.raises(uploads.UploadError, match="symbolic link"):
        uploads.extract_checkpoint_zip(buffer.getvalue(), tmp_path / "link")
    monkeypatch.setattr(settings, "MAX_UPLOAD_BYTES", 10)
    with pytest.raises(uploads.UploadError, match="limit"):
        uploads.extract_checkpoint_zip(zip_folder(tiny_checkpoint), tmp_path / "big")


def _register_script() -> None:
    """Run by AppTest.from_function: what the training page does with a finished run."""
    import os

    import streamlit as st

    from transformer.pipeline import load_pretrained
    from ui.models.menu import register_trained_model
    from ui.sections.input_analysis import require_analysis
    from ui.sections.sidebar import sidebar

    if not st.session_state.get("registered"):
        st.session_state["registered"] = True
        register_trained_model("from folder", os.environ["TINY_FOLDER"], select=False)
        register_trained_model("in memory", load_pretrained(os.environ["TINY_FOLDER"]))
    app = sidebar()
    st.write(f"current: {app.model.label}")
    analysis = require_analysis(app)
    st.write(f"output: {analysis.output_text}")


def test_register_trained_model(models_dir: Path, tiny_checkpoint: Path, monkeypatch) -> None:
    monkeypatch.setenv("TINY_FOLDER", str(tiny_checkpoint))
    at = AppTest.from_function(_register_script, default_timeout=TIMEOUT).run()
    assert_clean(at)
    options = at.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    assert options[-2:] == ["from folder (trained here)", "in memory (trained here)"]
    assert at.markdown[0].value == "current: in memory (trained here)"
    at.sidebar.selectbox(key=settings.MODEL_WIDGET).set_value("from folder (trained here)").run()
    assert_clean(at)
    assert at.markdown[0].value == "current: from folder (trained here)"


def test_a_cut_input_and_a_long_batch_say_so(models_dir: Path) -> None:
    at = open_app("8_masks", text="abc")
    at.sidebar.text_input(key=settings.TEXT_WIDGET).set_value("x" * 600).run()
    assert_clean(at)
    assert len(at.session_state[settings.TEXT]) == settings.MAX_INPUT_CHARS
    assert any("600 characters and was cut" in w.value for w in at.sidebar.warning)
    at.text_area(key="mask_batch").set_value("\n".join(["ab", "abc"] * 5)).run()
    assert_clean(at)
    assert any("4 more lines were left out" in i.value for i in at.info)
    assert len(at.selectbox(key="mask_row").options) == 6


def test_an_input_outside_the_training_domain_is_named_in_the_sidebar(models_dir: Path) -> None:
    at = open_app("4_attention", text="abc12")
    assert not at.sidebar.warning  # tiny-reverse learned the reverse task: abc12 lies inside it
    at.sidebar.text_input(key=settings.TEXT_WIDGET).set_value("abc12" * 8).run()
    assert_clean(at)
    warnings = [w.value for w in at.sidebar.warning]
    assert len(warnings) == 1 and "Outside what this model learned" in warnings[0] and "40 characters" in warnings[0]


def test_a_hugging_face_models_output_is_bounded_by_its_source() -> None:
    from types import SimpleNamespace

    from ui.compute.analysis import max_output_len

    marian = SimpleNamespace(max_output_len=512, config=SimpleNamespace(max_len=512), meta={"source": "huggingface"})
    assert max_output_len(marian, 16) == 3 * 16 + 10  # Marian-NMT's length factor
    assert max_output_len(marian) == 511 and max_output_len(marian, 1000) == 511
    ours = SimpleNamespace(max_output_len=30, config=SimpleNamespace(max_len=64),
                           meta={"task": "reverse", "max_output_len": 30})
    assert max_output_len(ours, 2) == 30  # our models keep their training data's bound
    # Issue 33: an uploaded checkpoint without that bound, of max_len 2,097,152, is bounded as a Marian model is
    unbounded = SimpleNamespace(max_output_len=2**21, config=SimpleNamespace(max_len=2**21), meta={})
    assert max_output_len(unbounded, 16) == 3 * 16 + 10 and max_output_len(unbounded) == 512


def test_a_csv_is_written_only_when_its_button_is_clicked(monkeypatch) -> None:
    """csv_button hands Streamlit a callable (a deferred download): no CSV is built on a rerun."""
    import pandas as pd

    from ui.state import widgets

    calls: dict = {}
    monkeypatch.setattr(widgets.st, "download_button", lambda label, data, **kwargs: calls.update(data=data, **kwargs))
    frame = pd.DataFrame({"a": [1, 2]})
    written = []
    monkeypatch.setattr(pd.DataFrame, "to_csv", lambda self, *a, **k: written.append(1) or "a\n1\n2\n")
    widgets.csv_button(frame, "x.csv")
    assert callable(calls["data"]) and not written  # nothing written yet
    assert calls["data"]() == b"a\n1\n2\n" and written == [1] and calls["file_name"] == "x.csv"


def test_server_config_is_read_as_written() -> None:
    """.streamlit/config.toml, as `streamlit run` in the repository reads it: no full garbage collection after
    every rerun (it held the GIL 0.4-1.3 s per rerun at opus-mt size), and the file watcher kept out of the
    folders the app or the tests write; and no file watcher at all (issue 45: watchdog watches every folder under
    app.py's whatever the blacklist, and a training run's folders coming and going printed ~20 KB of its
    RuntimeWarnings)."""
    code = ("from streamlit import config; config.get_config_options(force_reparse=True); "
            "print(config.get_option('runner.postScriptGC'), config.get_option('server.fileWatcherType'), "
            "config.get_option('server.folderWatchBlacklist'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(APP).parent, capture_output=True, text=True,
                         check=True).stdout
    gc_after_run, watcher, blacklist = out.split(" ", 2)
    assert gc_after_run == "False" and watcher == "none"
    assert all(folder in blacklist for folder in (".venv", "runs", "pretrained", "tests"))
