"""A session's uploaded models are capped, in count and in bytes on the server's disk, the oldest removed with a
message (issue 43, item 6: in public mode with uploads allowed, four 1 MB zips under four names kept 291 MB each
until the session ended, 1,164 MB in all)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui.models import uploads
from ui.state import settings, tempdirs

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def upload_into(state: dict, name: str, n_bytes: int) -> uploads.Kept:
    """What a successful upload leaves: a session folder of ``n_bytes``, a menu entry and a record of its zip."""
    slot = f"checkpoint upload {name}"
    folder = tempdirs.session_tempdir(slot, "test-upload-", state)
    (folder / "model.safetensors").write_bytes(b"\0" * n_bytes)
    label = f"{name} (uploaded)"
    state.setdefault(settings.SESSION_MODELS, {})[label] = object()
    state.setdefault(uploads.UPLOADS, {})[f"sha-{name}"] = ("ok", label, "")
    return uploads.Kept(slot, label, f"sha-{name}", uploads.folder_bytes(folder))


def folders(state: dict) -> dict[str, Path]:
    return {slot: owned.path for slot, owned in state[tempdirs.TEMPDIRS].items()}


@pytest.fixture
def public_uploads(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv(settings.PUBLIC_ENV, "1")
    monkeypatch.setenv(settings.PUBLIC_UPLOADS_ENV, "1")
    monkeypatch.delenv(settings.UPLOADS_PER_SESSION_ENV, raising=False)
    monkeypatch.delenv(settings.UPLOAD_MB_PER_SESSION_ENV, raising=False)
    return monkeypatch


def test_public_mode_caps_a_sessions_uploads_by_default(public_uploads) -> None:
    assert settings.uploads_per_session() == 3
    assert settings.upload_bytes_per_session() == settings.MAX_EXTRACTED_BYTES  # one upload's own cap
    public_uploads.delenv(settings.PUBLIC_ENV)
    assert settings.uploads_per_session() == 0 and settings.upload_bytes_per_session() == 0  # outside: no cap


def test_the_oldest_upload_goes_past_the_count(public_uploads) -> None:
    public_uploads.setenv(settings.UPLOADS_PER_SESSION_ENV, "2")
    state: dict = {}
    removed = [uploads.keep_upload(upload_into(state, name, 10), state) for name in ("a", "b", "c")]
    assert removed == [[], [], ["a (uploaded)"]]
    on_disk = folders(state)
    assert set(on_disk) == {"checkpoint upload b", "checkpoint upload c"}
    assert all(path.is_dir() for path in on_disk.values())
    assert set(state[settings.SESSION_MODELS]) == {"b (uploaded)", "c (uploaded)"}  # gone from the menu
    assert set(state[uploads.UPLOADS]) == {"sha-b", "sha-c"}  # the same zip again is unpacked again
    assert [k.label for k in state[uploads.KEPT]] == ["b (uploaded)", "c (uploaded)"]


def test_the_oldest_uploads_go_past_the_bytes_on_disk(public_uploads, tmp_path: Path) -> None:
    """1 MB for the session: three uploads of 0.4 MB each fit two at a time; one of 0.9 MB leaves alone."""
    public_uploads.setenv(settings.UPLOAD_MB_PER_SESSION_ENV, "1")
    state: dict = {}
    first = upload_into(state, "a", 400_000)
    first_folder = folders(state)["checkpoint upload a"]
    assert uploads.keep_upload(first, state) == []
    assert uploads.keep_upload(upload_into(state, "b", 400_000), state) == []
    assert uploads.keep_upload(upload_into(state, "c", 400_000), state) == ["a (uploaded)"]
    assert not first_folder.exists()
    assert uploads.keep_upload(upload_into(state, "d", 900_000), state) == ["b (uploaded)", "c (uploaded)"]
    assert [k.label for k in state[uploads.KEPT]] == ["d (uploaded)"]
    assert sum(uploads.folder_bytes(path) for path in folders(state).values()) <= 2**20
    note = uploads.removed_note(["b (uploaded)", "c (uploaded)"])
    assert note == ("To make room, your oldest uploads left the server: “b (uploaded)”, “c (uploaded)”. This server "
                    "keeps at most 3 uploaded models and 1 MB of them unpacked per session.")


def test_an_upload_larger_than_the_sessions_bytes_is_refused_while_unpacking(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("model.safetensors", b"\0" * 3 * 2**20)
    with pytest.raises(uploads.UploadError, match="unpacks to more than 2 MB"):
        uploads.extract_checkpoint_zip(buffer.getvalue(), tmp_path / "big", max_extracted=2 * 2**20)


def zip_folder(folder: Path, comment: str) -> bytes:
    """The folder zipped, with a comment that makes each zip's bytes (and so its sha256) its own."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.comment = comment.encode()
        for path in folder.iterdir():
            if path.is_file():
                archive.writestr(path.name, path.read_bytes())
    return buffer.getvalue()


def test_in_the_app_a_third_upload_removes_the_first_with_a_message(
        public_uploads, tiny_models_dir: Path, tmp_path: Path) -> None:
    """Public mode with uploads allowed and 2 uploads a session: three zips under three names leave two folders on
    disk, the first gone from the menu, and the sidebar says so."""
    public_uploads.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    public_uploads.setenv(settings.UPLOADS_PER_SESSION_ENV, "2")
    public_uploads.setattr("tempfile.tempdir", str(tmp_path))  # where the uploads' folders go
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    for name in ("first", "second", "third"):
        data = zip_folder(tiny_models_dir / "tiny-reverse", name)
        at.sidebar.get("file_uploader")[0].upload(f"{name}.zip", data, "application/zip").run()
        assert not at.exception and not at.sidebar.error
    assert len(list(tmp_path.glob("transformer-upload-*"))) == 2
    menu = at.sidebar.selectbox(key=settings.MODEL_WIDGET).options
    assert "first (uploaded)" not in " ".join(menu) and any("third (uploaded)" in option for option in menu)
    assert [i.value for i in at.sidebar.info] == [
        "To make room, your oldest upload left the server: “first (uploaded)”. This server keeps at most 2 uploaded "
        "models and 300 MB of them unpacked per session."]
