"""Every page of the app on a Hugging Face Marian (opus-mt) model: a tiny random one built by
tests/marian_helpers.py, in a models folder beside one of our own checkpoints, as pretrained/ holds them.

Each page must run without an exception or an error box and show its real content; the Heads and Patching
pages measure sentences the user gives, and start that work only at a button. The Marian model's numbers are
proven against ``transformers`` in tests/test_hub_parity.py; here it is the app around them.
"""

from __future__ import annotations

import base64
import html
import json
import shutil
from pathlib import Path

import app_helpers
import numpy as np
import pytest
from app_helpers import RecordedBars, assert_clean
from streamlit.testing.v1 import AppTest

from ui.sections import heads_navigation as navigation
from ui.state import settings

pytest.importorskip("transformers")

APP = str(Path(__file__).resolve().parent.parent / "app.py")
MARIAN = "tiny-marian"
TEXT = "abc"
TIMEOUT = 120


@pytest.fixture(scope="module")
def marian_models_dir(tiny_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models folder holding a tiny Marian folder and a copy of our tiny-reverse checkpoint."""
    from marian_helpers import make_marian_folder

    root = tmp_path_factory.mktemp("marian-models")
    make_marian_folder(root / MARIAN)
    shutil.copytree(tiny_models_dir / "tiny-reverse", root / "tiny-reverse")
    return root


@pytest.fixture
def models_dir(marian_models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(marian_models_dir))
    return marian_models_dir


@pytest.fixture(scope="module")
def marian(marian_models_dir: Path):
    from transformer.pipeline import load_pretrained

    return load_pretrained(marian_models_dir / MARIAN)


def open_page(page: str | None, text: str | None = TEXT, model: str = MARIAN, **state) -> AppTest:
    return app_helpers.open_page(page, text, model, timeout=TIMEOUT, **state)


# --- the menu ---------------------------------------------------------------------------------------


def test_the_menu_lists_the_marian_folder(models_dir: Path, marian) -> None:
    from ui.models.menu import shipped_models

    entries = {entry.label: entry for entry in shipped_models(models_dir)}
    assert {MARIAN, "tiny-reverse"} <= set(entries)
    at = open_page("1_model")
    assert_clean(at)
    # the menu names a Hugging Face model's family beside it; its value (and a link's) is the label alone
    assert {f"{MARIAN} · Marian", "tiny-reverse"} <= set(at.sidebar.selectbox(key=settings.MODEL_WIDGET).options)
    assert at.sidebar.selectbox(key=settings.MODEL_WIDGET).value == MARIAN
    caption = " ".join(c.value for c in at.sidebar.caption)
    assert f"Hugging Face Marian model {MARIAN}" in caption  # the family as the menu names it
    assert f"{marian.model.num_parameters():,} parameters" in caption


def test_folder_stamp_follows_every_kind_of_weights(tmp_path: Path) -> None:
    from ui.models.menu import folder_stamp

    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "marian"}')
    (folder / "pytorch_model.bin").write_bytes(b"x")
    before = folder_stamp(folder)
    (folder / "pytorch_model.bin").write_bytes(b"xy")  # rewritten: the folder must reload
    after_bin = folder_stamp(folder)
    assert after_bin != before
    (folder / "model.safetensors.index.json").write_text("{}")
    assert folder_stamp(folder) != after_bin


def test_a_broken_marian_folder_in_the_models_folder_is_a_message(marian_models_dir: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(marian_models_dir / MARIAN, tmp_path / "half-marian")
    (tmp_path / "half-marian" / "vocab.json").unlink()
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path))
    at = open_page("3_embeddings", model="half-marian")
    assert not at.exception, [e.value for e in at.exception]
    assert any("Cannot load half-marian" in e.value and "vocab.json" in e.value for e in at.sidebar.error)
    assert any("could not be loaded" in e.value for e in at.error)


# --- every page -------------------------------------------------------------------------------------


def test_model_page_counts_parameters_and_says_why_there_is_no_torch_comparison(models_dir: Path, marian) -> None:
    from transformer.network.interop import torch_reference_gap

    at = open_page("1_model")
    assert_clean(at)
    assert at.title[0].value == "The model"
    table = at.table[1].value  # parameters per part (a static table: its formulas wrap), indexed by part
    total = table.loc["total", "parameters"]
    assert total == marian.model.num_parameters()
    assert (table["parameters"] == table["formula gives"]).all()  # no final LayerNorm, a bias-only generator
    gap = torch_reference_gap(marian.config)
    assert gap
    notes = [i.value for i in at.info]
    assert any("does not apply" in n and gap in n and "transformers" in n for n in notes), notes
    assert not [b for b in at.button if b.key == "model_parity_run"]  # nothing to press that cannot work


def test_parameter_formulas_fit_a_marian_model_with_two_vocabularies(tmp_path: Path) -> None:
    from marian_helpers import make_marian_folder

    from transformer.network.model import count_parameters
    from transformer.pipeline import load_pretrained
    from ui.charts.model import expected_parameters

    pipe = load_pretrained(make_marian_folder(tmp_path / "two", shared=False, encoder_layers=1))
    assert expected_parameters(pipe.config) == count_parameters(pipe.model)


def test_model_page_keeps_the_comparison_for_our_models(models_dir: Path) -> None:
    at = open_page("1_model", model="tiny-reverse", text="abc12")
    assert_clean(at)
    at.button(key="model_parity_run").click().run()
    assert_clean(at)
    assert [m.label for m in at.metric][0] == "largest |difference| of logits"


def test_tokenization_shows_the_pieces(models_dir: Path, marian) -> None:
    from ui.charts.tokens import visible_piece

    at = open_page("2_tokenization")
    assert_clean(at)
    assert at.title[0].value == "Tokenization"
    ids = [*marian.src_tokenizer.encode(TEXT), marian.config.eos_id]
    chips = next(m.value for m in at.markdown if "token-chips" in m.value)
    for i in ids:
        assert html.escape(visible_piece(marian.src_tokenizer.id_to_piece(i))) in chips
        assert f"<small>{i}</small>" in chips
    intro = at.markdown[0].value
    assert f"`<pad>` {marian.config.pad_id} (the decoder's start)" in intro and "`</s>` 0" in intro
    assert any("starts with <pad>" in c.value for c in at.caption)
    assert any("comes from Hugging Face" in i.value for i in at.info)  # no built-in task to retrain on


@pytest.mark.parametrize(("page", "title"), [("3_embeddings", "Embeddings and positional encoding"),
                                             ("4_attention", "Attention"), ("5_explain", "Explain an output token")])
def test_chart_pages_draw(models_dir: Path, page: str, title: str) -> None:
    at = open_page(page)
    assert_clean(at)
    assert at.title[0].value == title
    assert at.get("plotly_chart")
    assert at.get("download_button")


def test_masks_page_keeps_the_decoder_start_that_is_the_pad_id(models_dir: Path, marian) -> None:
    at = open_page("8_masks", mask_batch="abc\nhello there")
    assert_clean(at)
    assert at.title[0].value == "Masks"
    assert at.get("plotly_chart")
    target = at.dataframe[1].value  # the decoder input batch: "piece (id)" per position
    pad = marian.config.pad_id
    assert list(target.iloc[:, 0]) == [f"<pad> ({pad})"] * 2  # position 0: the start, a real token
    assert not target.iloc[0, 1].startswith("<pad>")  # then the first output token, not shifted


def test_decoding_shows_a_translation(models_dir: Path, marian) -> None:
    from ui.compute.analysis import max_output_len, source_len

    at = open_page("9_decoding")
    assert_clean(at)
    assert at.title[0].value == "Decoding"
    limit = max_output_len(marian, source_len(marian, TEXT))  # Marian-NMT's bound: 3 per source token + 10
    assert limit == 3 * source_len(marian, TEXT) + 10
    expected = marian.trace(TEXT, max_len=limit, warn=False).output_text
    assert expected
    assert expected in [c.value for c in at.code]


def test_training_page_says_the_model_is_not_trained_here(models_dir: Path) -> None:
    at = open_page("10_training")
    assert_clean(at)
    assert at.title[0].value == "Training"
    assert any("cannot be trained further here" in i.value for i in at.info)


# --- Heads: the user's sentences ------------------------------------------------------------------------


SOURCES = "abc\nhello there\nxyz"


def test_heads_page_waits_for_sentences_and_a_button(models_dir: Path) -> None:
    at = open_page("6_heads")
    assert_clean(at)
    assert at.title[0].value == "What does each head do?"
    assert not any("built-in task" in i.value for i in at.info)  # the old dead end is gone
    assert any("Give the sentences" in i.value for i in at.info)
    at.text_area(key="heads_sources").set_value(SOURCES).run()
    assert_clean(at)
    assert not at.get("plotly_chart"), "typing sentences does not start the measurement"
    assert any("model's own greedy translations are used" in c.value for c in at.caption)
    at.button(key="heads_run").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2  # the head grid and the pruning curve
    summary = at.dataframe[-1].value
    assert len(summary) == 2 * (2 + 2 + 2)
    assert {"kind", "layer", "head", "entropy", "importance", "role"} <= set(summary.columns)
    assert any("the model's own greedy translations" in s.value for s in at.success)
    sentences = at.dataframe[0].value
    assert list(sentences["source"]) == SOURCES.splitlines()
    at.run()  # a rerun (e.g. a click elsewhere) shows it again without a new click
    assert len(at.get("plotly_chart")) == 2


def test_heads_page_on_a_large_model_bounds_its_work(models_dir: Path, marian, monkeypatch: pytest.MonkeyPatch) -> None:
    """At opus-mt size one decoding of 40 sentences takes seconds and the curve decodes once per step: on a large
    model the model's own references stop at the source length + BATCH_EXTRA, and the curve waits for a second
    button and runs on N_PRUNING_LARGE sentences after every PRUNING_EVERY_LARGE-th head; the page says so."""
    import ui.compute.model_size
    from ui.compute import heads, shared_work
    from ui.compute.analysis import BATCH_EXTRA

    bars = RecordedBars()
    monkeypatch.setattr(shared_work, "st", bars)
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)  # every model is large
    monkeypatch.setattr(heads, "N_PRUNING_LARGE", 2)
    monkeypatch.setattr(heads, "PRUNING_EVERY_LARGE", 5)  # the tiny model has 12 heads: steps 0, 5, 10, 12
    sources = "abd\nhello there\nxyz\nzz top"  # not the small model's sentences: its report is cached
    at = open_page("6_heads", heads_sources=sources)
    at.button(key="heads_run").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 1 and at.dataframe  # the statistics, not yet the curve
    assert "Run the pruning curve on 2 sentences" in at.button(key="heads_pruning_run").label
    assert not any("ablation" in text for _, text in bars.told)  # skipped on a large model
    bars.told.clear()
    at.button(key="heads_pruning_run").click().run()
    assert_clean(at)
    assert [share for share, _ in bars.told] == [0.0, 0.0, 0.25, 0.5, 0.75, 1.0]  # the bar, then 4 steps, done
    assert bars.told[2][1] == ("Switching the heads off, least important first: following the gradient "
                               "importance: decoding with 5 of 12 heads off")
    curve = json.loads(at.get("plotly_chart")[1].proto.spec)["data"][0]
    n_heads = 3 * 2 * marian.config.n_heads
    assert n_heads == 12 and list(_array(curve["x"])) == [0, 5, 10, 12]
    assert "the first 2 of your sentences after each 5 heads" in " ".join(m.value for m in at.markdown)
    src_len = marian.encode_source(sources.splitlines(), warn=False).size(1)
    references = at.dataframe[0].value["reference"]
    lengths = [len(marian.tgt_tokenizer.encode(r)) for r in references]
    assert max(lengths) <= src_len + BATCH_EXTRA


def test_heads_page_shows_its_progress_and_computes_once(models_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The statistics move a progress bar from 0 to 1 (the model's translations, the heads, the pruning curves)
    and clear it; a rerun, and another browser with the same sentences, get the kept report without a bar."""
    from ui.compute import heads, shared_work

    bars, measured = RecordedBars(), []
    monkeypatch.setattr(shared_work, "st", bars)
    measure_own = heads.measure_own
    monkeypatch.setattr(heads, "measure_own", lambda *args: measured.append(1) or measure_own(*args))
    sources = "ab ab\nba\nabc abc abc"  # sentences no other test measures
    at = open_page("6_heads", heads_sources=sources)
    at.button(key="heads_run").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2 and measured == [1] and bars.emptied == 1
    shares, texts = [share for share, _ in bars.told], [text for _, text in bars.told]
    assert shares[0] == 0.0 and shares[-1] == 1.0 and shares == sorted(shares)
    label = "Measuring every head on your sentences:"
    assert texts[0] == label and all(t.startswith(label) for t in texts)
    said = " | ".join(texts)
    for step in ("translating sentences 1-3 of 3", "the attention patterns of every head",
                 "ablation importance: encoder layer 0 head 0 off", "gradient importance: sentences 1-3 of 3",
                 "the pruning curve, following the gradient importance: decoding with 12 of 12 heads off"):
        assert step in said, said
    told = len(bars.told)
    at.run()
    other = open_page("6_heads", heads_sources=sources)
    other.button(key="heads_run").click().run()
    assert_clean(other)
    assert len(other.get("plotly_chart")) == 2 and measured == [1] and len(bars.told) == told


def test_heads_page_with_the_users_references(models_dir: Path) -> None:
    at = open_page("6_heads", heads_sources=SOURCES, heads_references="cba\nereht olleh\nzyx")
    at.button(key="heads_run").click().run()
    assert_clean(at)
    assert any("your references" in s.value for s in at.success)
    assert list(at.dataframe[0].value["reference"]) == ["cba", "ereht olleh", "zyx"]
    assert len(at.get("plotly_chart")) == 2


def test_heads_page_reads_an_uploaded_file(models_dir: Path) -> None:
    at = open_page("6_heads")
    assert [u.proto.max_upload_size_mb for u in at.main.get("file_uploader")] == [1, 1]  # as read_upload's cap
    at.get("file_uploader")[0].upload("lines.txt", SOURCES.encode("utf-8"), "text/plain").run()
    assert_clean(at)
    at.button(key="heads_run").click().run()
    assert_clean(at)
    assert list(at.dataframe[0].value["source"]) == SOURCES.splitlines()


@pytest.mark.parametrize(("sources", "references", "message"), [
    ("abc\nxyz", "cba", "2 source lines but 1 references"),
    ("abc\n\nxyz", "", "line 2 is empty"),
    ("\n".join(["abc"] * 201), "", "at most 200"),
    ("abc " * 200, "", "longer than the model's 64 positions"),
    ("abc", "cba " * 200, "References: line 1 is longer"),
])
def test_bad_sentences_are_a_message(models_dir: Path, sources: str, references: str, message: str) -> None:
    at = open_page("6_heads", heads_sources=sources, heads_references=references)
    assert_clean(at)
    warnings = [w.value for w in at.warning]
    assert any(message in w for w in warnings), warnings
    assert not [b for b in at.button if b.key == "heads_run"]
    assert not at.get("plotly_chart")


def test_check_sentences(marian) -> None:
    from ui.compute.user_sentences import Sentences, check_sentences

    assert check_sentences(marian, "\n abc \nxyz\n\n") == Sentences(("abc", "xyz"), None)
    assert check_sentences(marian, "abc\nxyz", "cba\nzyx\n").references == ("cba", "zyx")
    for sources, references, message in [("", "", "no source sentences"), ("  \n ", "", "no source sentences"),
                                         ("abc\n \nxyz\n\nq", "", "line 2, 4 are empty"),
                                         ("abc\n\x00\x01", "", "nothing to translate")]:
        with pytest.raises(ValueError, match=message):
            check_sentences(marian, sources, references)


def test_built_in_task_keeps_its_sentences_and_can_take_the_users(models_dir: Path, monkeypatch) -> None:
    from ui.compute import heads

    monkeypatch.setattr(heads, "N_SENTENCES", 24)
    monkeypatch.setattr(heads, "N_HELD_OUT", 6)
    at = open_page("6_heads", model="tiny-reverse", text="abc12")
    assert_clean(at)
    assert at.radio(key="heads_sentences_source").value == navigation.TASK_SENTENCES
    assert len(at.get("plotly_chart")) == 2  # today's behaviour: the task's sentences, with their alignment
    assert list(at.dataframe[0].value["what"]) == ["alignment"]
    at.radio(key="heads_sentences_source").set_value(navigation.OWN_SENTENCES).run()
    assert not at.get("plotly_chart")
    at.text_area(key="heads_sources").set_value("abc12\nxyz").run()
    at.button(key="heads_run").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 2
    assert any("without a true alignment" in c.value for c in at.caption)


# --- Patching: the user's pair ------------------------------------------------------------------------


def test_patching_runs_on_the_users_pair_at_a_button(models_dir: Path, marian) -> None:

    at = open_page("7_patching", **{navigation.CORRUPT: "abd", navigation.CORRUPT_FOR: TEXT})
    assert_clean(at)
    assert at.title[0].value == "Activation patching"
    shown = " ".join(m.value for m in at.markdown)
    assert "Clean translation" in shown and "Corrupted translation" in shown
    assert not at.get("plotly_chart"), "patching starts at the button, not on opening the page"
    at.button(key="patch_run").click().run()
    assert_clean(at)
    assert len(at.get("plotly_chart")) == 3
    assert at.get("download_button")


def test_default_corruption_skips_the_models_special_ids(marian) -> None:
    from ui.compute.patching import default_corruption

    twin = default_corruption(marian, "hello there")
    assert twin is not None and twin != "hello there"
    assert len(marian.src_tokenizer.encode(twin)) == len(marian.src_tokenizer.encode("hello there"))
    assert "<pad>" not in twin and "</s>" not in twin


# --- uploading and opening a Marian folder ----------------------------------------------------------------


def _zip(folder: Path, prefix: str = "", skip: tuple[str, ...] = (), extra: dict[str, bytes] | None = None) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in folder.iterdir():
            if path.is_file() and path.name not in skip:
                archive.writestr(prefix + path.name, path.read_bytes())
        for name, data in (extra or {}).items():
            archive.writestr(prefix + name, data)
    return buffer.getvalue()


def _as_bin(folder: Path) -> bytes:
    """The folder's weights as the pytorch_model.bin older opus-mt repositories hold."""
    import io

    import torch
    from safetensors.torch import load_file

    buffer = io.BytesIO()
    torch.save(load_file(folder / "model.safetensors"), buffer)
    return buffer.getvalue()


def test_upload_a_zipped_marian_folder(models_dir: Path) -> None:
    at = open_page("4_attention")
    at.sidebar.get("file_uploader")[0].upload("opus.zip", _zip(models_dir / MARIAN, "opus/"), "application/zip").run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "opus (uploaded)"
    assert at.title[0].value == "Attention"


def test_upload_a_marian_folder_with_pytorch_model_bin(models_dir: Path) -> None:
    data = _zip(models_dir / MARIAN, skip=("model.safetensors",), extra={"pytorch_model.bin": _as_bin(
        models_dir / MARIAN)})
    at = open_page("3_embeddings")
    at.sidebar.get("file_uploader")[0].upload("binary.zip", data, "application/zip").run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "binary (uploaded)"
    assert at.get("plotly_chart")


def test_extract_accepts_every_kind_of_weights(tmp_path: Path) -> None:
    import io
    import zipfile

    from ui.models import uploads

    for name in ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("m/config.json", "{}")
            archive.writestr(f"m/{name}", b"x")
        assert uploads.extract_checkpoint_zip(buffer.getvalue(), tmp_path / name).name == "m"


def test_broken_marian_uploads_are_messages(models_dir: Path) -> None:
    folder = models_dir / MARIAN
    at = open_page("3_embeddings")
    for data, message in [
        (_zip(folder, skip=("source.spm",)), "source.spm"),
        (_zip(folder, skip=("model.safetensors",), extra={"pytorch_model.bin": b"not a pickle"}), "pytorch_model.bin"),
        # torch's unpickler fails on a 1-byte file with struct.error, which the loader does not (yet) turn into a
        # CheckpointError: still a message
        (_zip(folder, skip=("model.safetensors",), extra={"pytorch_model.bin": b"j"}), "Not a usable checkpoint"),
        (_zip(folder, skip=("model.safetensors", "config.json")), "config.json and model.safetensors"),
    ]:
        at.sidebar.get("file_uploader")[0].set_value(("bad.zip", data, "application/zip")).run()
        assert not at.exception, [e.value for e in at.exception]
        errors = [e.value for e in at.sidebar.error]
        assert len(errors) == 1 and message in errors[0], errors
        assert at.session_state[settings.MODEL] == MARIAN  # the current model is kept


def test_open_a_folder_on_the_server(models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.OPEN_ROOTS_ENV, str(tmp_path))  # a folder the server allows (tests/test_public.py)
    elsewhere = tmp_path / "opus-elsewhere"
    shutil.copytree(models_dir / MARIAN, elsewhere)
    at = open_page("2_tokenization", model="tiny-reverse", text="abc12")
    at.sidebar.text_input(key=settings.OPEN_WIDGET).set_value(str(elsewhere)).run()
    at.sidebar.button(key=settings.OPEN_BUTTON).click().run()
    assert_clean(at)
    assert at.session_state[settings.MODEL] == "opus-elsewhere (opened)"
    assert any("Opened as “opus-elsewhere (opened) · Marian”" in s.value for s in at.sidebar.success)  # as the menu
    assert at.title[0].value == "Tokenization"


def _bad_folder(root: Path, kind: str) -> Path:
    """A folder that cannot be opened: missing, empty, another Hugging Face model type, a Marian one half there."""
    folder = root / kind
    if kind != "nowhere":
        folder.mkdir()
    if kind in ("bert", "half"):
        (folder / "config.json").write_text('{"model_type": "%s"}' % ("bert" if kind == "bert" else "marian"))
    return folder


@pytest.mark.parametrize(("kind", "message"), [("nowhere", "there is no model folder by that path"),
                                               ("empty", "has no config.json"),
                                               ("bert", "is an encoder-only model"), ("half", "a marian folder needs")])
def test_opening_a_bad_folder_is_a_message(models_dir: Path, tmp_path: Path, kind: str, message: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.OPEN_ROOTS_ENV, str(tmp_path))
    path = _bad_folder(tmp_path, kind)
    at = open_page("3_embeddings")
    at.sidebar.text_input(key=settings.OPEN_WIDGET).set_value(str(path)).run()
    at.sidebar.button(key=settings.OPEN_BUTTON).click().run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and message in errors[0], errors
    assert at.session_state[settings.MODEL] == MARIAN


def test_the_model_pages_diagram_reads_a_marian_config_without_loading_the_model(models_dir: Path, marian,
                                                                                   monkeypatch) -> None:
    """The first page's diagram comes from config.json before torch and the model load, for a Marian folder too
    (it waited for the 74 M-parameter load at opus-mt size)."""
    from ui.sections import architecture

    monkeypatch.setattr(architecture.st, "query_params", {"model": MARIAN})
    config = architecture.first_config()
    assert config is not None
    sizes = ("d_model", "n_heads", "d_ff", "n_encoder_layers", "n_decoder_layers", "src_vocab_size")
    assert {k: getattr(config, k) for k in sizes} == {k: getattr(marian.config, k) for k in sizes}


def test_masks_on_a_large_model_decode_the_batch_to_its_source_length_plus_ten(
        models_dir: Path, marian, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a model of opus-mt size each decoding step reads the whole output projection: the Masks batch stops at
    the padded source length + BATCH_EXTRA tokens (a random model never says </s>), and says where it cut."""
    import ui.compute.model_size
    from ui.compute.analysis import BATCH_EXTRA, batch_output_len, max_output_len

    small = open_page("8_masks", mask_batch="abc\nhello there")
    assert_clean(small)
    src_len = marian.encode_source(["abc", "hello there"], warn=False).size(1)
    assert batch_output_len(marian, src_len) == max_output_len(marian, src_len) > src_len + BATCH_EXTRA
    monkeypatch.setattr(ui.compute.model_size, "LARGE_MODEL", 0)  # every model is large
    assert batch_output_len(marian, src_len) == src_len + BATCH_EXTRA
    batch = ["abd", "hello there"]  # another batch of as many source tokens: the small model's is cached
    assert marian.encode_source(batch, warn=False).size(1) == src_len
    at = open_page("8_masks", mask_batch="\n".join(batch))
    assert_clean(at)
    width = at.dataframe[1].value.shape[1]  # the decoder input: the start + the outputs
    # the folder's forced_eos_token_id puts </s> at the bound, as translate does: the decoder input stops before it
    assert width == src_len + BATCH_EXTRA < small.dataframe[1].value.shape[1]
    notes = " ".join(i.value for i in at.info)
    assert f"Lines 1, 2 had no `</s>` within {src_len + BATCH_EXTRA} output tokens but the one the model's " \
        "decoding rules force at that bound" in notes
    assert f"at most its source length + {BATCH_EXTRA} tokens" in notes


def _array(data) -> np.ndarray:
    """A trace's array as the page sent it: nested lists, or Plotly's typed array {"dtype", "bdata", "shape"}."""
    if isinstance(data, dict):
        flat = np.frombuffer(base64.b64decode(data["bdata"]), dtype=data["dtype"]).astype(float)
        return flat.reshape([int(n) for n in str(data.get("shape", len(flat))).split(",")])
    return np.asarray(data, dtype=float)


@pytest.mark.parametrize("scale_embedding", [True, False])
def test_embeddings_page_shows_marians_own_table_and_scale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           scale_embedding: bool) -> None:
    """A Marian model's positional table is sines then cosines (not the paper's alternation) and its embedding may
    be unscaled: the page's formulas, table, curve names and titles are the model's own, not the paper's."""
    from marian_helpers import make_marian_folder

    from transformer.pipeline import load_pretrained

    folder = make_marian_folder(tmp_path / "opus-plain", scale_embedding=scale_embedding)
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path))
    model = load_pretrained(folder).model
    at = open_page("3_embeddings", model="opus-plain", emb_positions=20)
    assert_clean(at)
    latex = [m.value for m in at.latex]
    assert "d_{model}/2+i" in latex[0] and "2i+1" not in latex[0]
    assert ("\\sqrt{d_{model}}" in latex[1]) == scale_embedding
    assert any("does not scale it" in m.value for m in at.markdown) != scale_embedding
    table, curves, vectors = (json.loads(c.proto.spec) for c in at.get("plotly_chart")[:3])
    shown = _array(table["data"][0]["z"])
    assert shown.shape == (20, model.config.d_model)
    np.testing.assert_array_equal(shown, model.positional.pe[:20].numpy())  # what the model adds, bit for bit
    half = model.config.d_model // 2
    names = [trace["name"] for trace in curves["data"]]
    assert "dim 0 (sin, i=0)" in names and f"dim {half} (cos, i=0)" in names
    titles = [a["text"] for a in vectors["layout"]["annotations"]][:1]
    assert titles == (["embedding × √d_model"] if scale_embedding else ["embedding"])
