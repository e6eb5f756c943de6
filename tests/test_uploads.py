"""Uploads: temporary folders live as long as their session, zip limits hold, hostile checkpoints are refused."""

from __future__ import annotations

import gc
import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.models import uploads
from ui.state import settings, tempdirs

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def zip_bytes(files: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def zip_folder(folder: Path, prefix: str = "") -> bytes:
    return zip_bytes({prefix + p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()})


# --- temporary folders ------------------------------------------------------------------------------


def test_a_replaced_folder_is_removed_and_the_rest_go_with_the_session() -> None:
    state: dict = {}
    first = tempdirs.session_tempdir("upload", "test-", state)
    (first / "file").write_text("x")
    second = tempdirs.session_tempdir("upload", "test-", state)
    other = tempdirs.session_tempdir("pairs", "test-", state)
    assert not first.exists() and second.is_dir() and other.is_dir()  # replaced: removed at once
    tempdirs.release("pairs", state)
    assert not other.exists()
    del state  # the session's state is dropped when the session ends
    gc.collect()
    assert not second.exists()


# --- zip limits -----------------------------------------------------------------------------------


def test_zip_entry_count_and_unpacked_size_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "MAX_ZIP_ENTRIES", 5)
    with pytest.raises(uploads.UploadError, match="6 entries; the limit is 5"):
        uploads.extract_checkpoint_zip(zip_bytes({f"f{i}": b"x" for i in range(6)}), tmp_path / "many")
    monkeypatch.setattr(settings, "MAX_EXTRACTED_BYTES", 1000)
    with pytest.raises(uploads.UploadError, match="unpacks to more than"):
        uploads.extract_checkpoint_zip(zip_bytes({"a": b"x" * 600, "b": b"y" * 600}), tmp_path / "big")


def test_a_zip_bomb_is_refused_while_unpacking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10 MB entry of zeros deflates to ~10 KB; with its header lying about its size it gets past the
    declared-size check and must be stopped by counting what is actually written."""
    monkeypatch.setattr(settings, "MAX_EXTRACTED_BYTES", 2**20)
    bomb = zip_bytes({"config.json": b"\0" * (10 * 2**20)}, zipfile.ZIP_DEFLATED)
    assert len(bomb) < 50_000
    with pytest.raises(uploads.UploadError, match="unpacks to more than 1 MB"):
        uploads.extract_checkpoint_zip(bomb, tmp_path / "honest")
    # the same bomb, its central directory claiming 100 bytes: the declared sizes pass, the stream does not
    liar = bytearray(bomb)
    central = liar.rfind(b"PK\x01\x02")
    struct.pack_into("<I", liar, central + 24, 100)  # uncompressed size in the central directory
    local = liar.find(b"PK\x03\x04")
    struct.pack_into("<I", liar, local + 22, 100)  # and in the local header
    destination = tmp_path / "liar"
    with pytest.raises(uploads.UploadError):
        uploads.extract_checkpoint_zip(bytes(liar), destination)
    written = sum(p.stat().st_size for p in destination.rglob("*") if p.is_file())
    assert written <= 2**20 + 2**20  # never more than the limit plus one chunk


# --- a hostile checkpoint in the app ------------------------------------------------------------------


def test_an_uploaded_checkpoint_with_a_huge_config_is_refused_in_the_sidebar(
        tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))  # where the upload's folder goes
    source = tiny_models_dir / "tiny-numbers"
    files = {p.name: p.read_bytes() for p in source.iterdir() if p.is_file()}
    document = json.loads(files["config.json"])
    document["model"].update(src_vocab_size=10**9, tgt_vocab_size=10**9, d_model=8192, n_heads=8)
    files["config.json"] = json.dumps(document).encode()
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state[settings.MODEL] = "tiny-reverse"
    at.run()
    at.sidebar.get("file_uploader")[0].upload("huge.zip", zip_bytes(files), "application/zip").run()
    assert not at.exception
    errors = [e.value for e in at.sidebar.error]
    assert len(errors) == 1 and "src_vocab_size is 1000000000 in config.json" in errors[0], errors
    assert str(tmp_path) not in errors[0]  # no server path in the message
    assert not list(tmp_path.glob("transformer-upload-*")), "the temporary folder is removed"
    assert at.session_state[settings.MODEL] == "tiny-reverse"


def test_uploading_the_same_name_again_replaces_the_folder(
        tiny_models_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    for source in ("tiny-numbers", "tiny-reverse"):  # two different files, one name
        at.sidebar.get("file_uploader")[0].upload("mine.zip", zip_folder(tiny_models_dir / source),
                                                  "application/zip").run()
        assert not at.exception and not at.sidebar.error
    assert len(list(tmp_path.glob("transformer-upload-*"))) == 1
    assert at.session_state[settings.MODEL] == "mine (uploaded)"


# --- caps enforced on the server (issue 33: the uploaders' caps were only the browser's) -----------------------


def test_the_servers_upload_limit_is_the_largest_uploaders_cap() -> None:
    import tomllib

    from ui.compute.user_sentences import MAX_FILE_MB
    from ui.models.training import MAX_PAIRS_MB

    config = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == settings.MAX_UPLOAD_BYTES // 2**20 == max(
        settings.MAX_UPLOAD_BYTES // 2**20, MAX_PAIRS_MB, MAX_FILE_MB)
    root = Path(APP).parent
    with_uploaders = [path for path in [*root.glob("pages/*.py"), *root.glob("ui/**/*.py")]
                      if ".file_uploader(" in path.read_text()]
    assert len(with_uploaders) >= 3  # the Training page, the user's sentences, the model upload
    for path in with_uploaders:  # every uploader states its cap
        source = path.read_text()
        assert source.count(".file_uploader(") == source.count("max_upload_size="), path.relative_to(root)


def test_an_oversized_pairs_file_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 49 MB pairs file on the Training page was parsed whole (+2.3 GB): the page's uploader had no cap."""
    from types import SimpleNamespace

    from ui.models import training

    monkeypatch.setattr(training, "load_pairs", lambda *a, **k: pytest.fail("parsed an oversized pairs file"))
    data = b"a\tb\n" * (training.MAX_PAIRS_BYTES // 4 + 1)
    status, message = training.read_upload(SimpleNamespace(name="big.tsv", getvalue=lambda: data))
    assert status == "error" and message == f"big.tsv is 5.0 MB; the limit is {training.MAX_PAIRS_MB} MB"


def test_a_text_box_is_capped_like_the_file_it_stands_for() -> None:
    """20 MB of Pharaoh links in the text box took 9.3 s, re-parsed on every rerun."""
    from ui.compute.user_sentences import MAX_FILE_BYTES, check_text_size

    assert check_text_size("0-0 1-1\n" * 10, "Gold links") == "0-0 1-1\n" * 10
    with pytest.raises(ValueError, match=r"Gold links: 1,048,577 characters; the limit is 1,048,576 \(as for a 1 MB"):
        check_text_size("x" * (MAX_FILE_BYTES + 1), "Gold links")
