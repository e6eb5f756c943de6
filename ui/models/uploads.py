"""Models from outside the menu: a zipped model folder uploaded (unpacked safely), or a folder on the server's
disk opened by its path; the sidebar's widgets for both.

A model folder is one of our checkpoint folders (config.json + model.safetensors + the tokenizer files, as
training writes them) or a Hugging Face folder of one of the families (config.json with its model_type, the
weights as model.safetensors, a sharded model.safetensors.index.json or pytorch_model.bin, and the tokenizer's
files: Marian's source.spm, target.spm and vocab.json, the others' tokenizer.json; see ``transformer.hub.folder``).

An uploaded model's folder lives as long as its session (``ui.state.tempdirs``); a session keeps at most
``settings.uploads_per_session()`` of them and ``settings.upload_bytes_per_session()`` bytes on disk (public mode: 3
and 300 MB), its oldest removed, with a message, when a new one comes (``keep_upload``). Without that cap, four 1 MB
zips under four names kept 291 MB each on the server's disk until the session ended.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from transformer.checkpoints.checkpoint import CONFIG_FILE, WEIGHTS_FILE
from transformer.hub.folder import BIN_FILE, SAFETENSORS_INDEX
from ui.models.menu import (
    LOAD_ERRORS,
    load_error_text,
    open_folder,
    preload,
    register_trained_model,
    session_menu_text,
)
from ui.state import settings
from ui.state.tempdirs import release, session_tempdir

UPLOADS = "_uploads"  # session_state: sha256 of an uploaded file -> ("ok", menu label, note) or ("error", message, "")
KEPT = "_uploads_kept"  # session_state: this session's uploaded models on the server's disk, oldest first (``Kept``)
OPENED = "_opened_folder"  # session_state: the last "Open" of a folder: ("ok", menu label) or ("error", message)
WEIGHT_FILES = (WEIGHTS_FILE, SAFETENSORS_INDEX, BIN_FILE)  # any of them beside config.json makes a model folder


class UploadError(ValueError):
    """An uploaded .zip that is not a usable checkpoint folder; the message says why."""


def extract_checkpoint_zip(data: bytes, destination: Path, max_extracted: int | None = None) -> Path:
    """Unpack a zipped checkpoint folder safely into ``destination``; return the checkpoint folder.

    Refuses archives that are too large (packed or unpacked; ``settings.MAX_UPLOAD_BYTES``,
    ``max_extracted`` or else ``MAX_EXTRACTED_BYTES``), have too many entries (``MAX_ZIP_ENTRIES``), hold links or paths
    that leave ``destination`` (zip slip), or lack config.json and the weights side by side (at the
    top or in one folder): model.safetensors, or for a Hugging Face folder model.safetensors.index.json
    (with its shards) or pytorch_model.bin.
    """
    max_upload, max_extracted = settings.MAX_UPLOAD_BYTES, max_extracted or settings.MAX_EXTRACTED_BYTES
    if len(data) > max_upload:
        raise UploadError(f"the file is {len(data) / 2**20:.1f} MB; the limit is {max_upload // 2**20} MB")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UploadError("this is not a zip file") from None
    root = destination.resolve()
    root.mkdir(parents=True, exist_ok=True)
    with archive:
        entries = archive.infolist()
        if len(entries) > settings.MAX_ZIP_ENTRIES:
            raise UploadError(f"the zip holds {len(entries)} entries; the limit is {settings.MAX_ZIP_ENTRIES}")
        if sum(info.file_size for info in entries) > max_extracted:
            raise UploadError(f"the zip unpacks to more than {max_extracted // 2**20} MB")
        written = 0
        for info in entries:
            name = info.filename.replace("\\", "/")
            target = (root / name).resolve()
            if name.startswith("/") or not target.is_relative_to(root) or target == root:
                raise UploadError(f"unsafe path in the zip: {info.filename!r}")
            if (info.external_attr >> 16) & 0o170000 == 0o120000:
                raise UploadError(f"the zip holds a symbolic link: {info.filename!r}")
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as source, open(target, "wb") as out:
                    while chunk := source.read(1 << 20):
                        written += len(chunk)
                        if written > max_extracted:
                            raise UploadError(f"the zip unpacks to more than {max_extracted // 2**20} MB")
                        out.write(chunk)
            except (zipfile.BadZipFile, RuntimeError, EOFError, zlib.error, NotImplementedError) as error:
                raise UploadError(f"cannot unpack {info.filename!r}: {error}") from None
    configs = sorted((p.parent for p in root.rglob(CONFIG_FILE) if "__MACOSX" not in p.parts),
                     key=lambda p: len(p.parts))
    for folder in configs:
        if any((folder / name).is_file() for name in WEIGHT_FILES):
            return folder
    raise UploadError(f"the zip must hold a model folder: {CONFIG_FILE} and {WEIGHTS_FILE} side by side (a "
                      f"Hugging Face folder may hold {SAFETENSORS_INDEX} or {BIN_FILE} instead)")


@dataclass(frozen=True)
class Kept:
    """One uploaded model that this session keeps on the server's disk."""

    slot: str  # its ``ui.state.tempdirs`` slot, which holds its folder
    label: str  # its menu label
    digest: str  # the sha256 of its zip: its key in ``UPLOADS``
    n_bytes: int  # what its folder takes on disk, unpacked


def folder_bytes(folder: Path) -> int:
    """The bytes of the files under ``folder`` (what an unpacked upload takes on disk)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def forget(slot: str, state: MutableMapping[str, Any] | None = None) -> str | None:
    """Remove the upload held in ``slot``: its folder, its menu entry and its record (so the same zip uploaded again
    is unpacked again); returns its menu label, None when the slot held no upload."""
    state = st.session_state if state is None else state
    kept = state.get(KEPT, [])
    gone = next((k for k in kept if k.slot == slot), None)
    release(slot, state)
    if gone is None:
        return None
    state[KEPT] = [k for k in kept if k is not gone]
    state.get(settings.SESSION_MODELS, {}).pop(gone.label, None)
    state.get(UPLOADS, {}).pop(gone.digest, None)
    return gone.label


def keep_upload(new: Kept, state: MutableMapping[str, Any] | None = None) -> list[str]:
    """Record ``new`` as this session's newest upload, then remove its oldest (``forget``) while the session keeps
    more than ``settings.uploads_per_session()`` models or ``settings.upload_bytes_per_session()`` bytes (0: no
    cap); returns the labels removed, oldest first. The newest stays: its zip was refused while unpacking had it
    passed the session's bytes (``upload_widget``)."""
    state = st.session_state if state is None else state
    state[KEPT] = [*state.get(KEPT, []), new]
    count, cap = settings.uploads_per_session(), settings.upload_bytes_per_session()
    removed = []
    while len(state[KEPT]) > 1 and ((count and len(state[KEPT]) > count)
                                    or (cap and sum(k.n_bytes for k in state[KEPT]) > cap)):
        removed.append(forget(state[KEPT][0].slot, state))
    return [label for label in removed if label is not None]


def removed_note(removed: list[str]) -> str:
    """What the sidebar says when a new upload removed older ones: which, and the session's caps."""
    if not removed:
        return ""
    count, cap = settings.uploads_per_session(), settings.upload_bytes_per_session()
    caps = " and ".join(part for part in (f"{count} uploaded models" if count else "",
                                          f"{cap / 2**20:.0f} MB of them unpacked" if cap else "") if part)
    names = ", ".join(f"“{label}”" for label in removed)
    return (f"To make room, your oldest upload{'s' if len(removed) > 1 else ''} left the server: {names}. This "
            f"server keeps at most {caps} per session.")


def upload_widget() -> None:
    """The uploader: a new .zip is unpacked, loaded once and becomes the current model."""
    uploaded = st.file_uploader("A zipped model folder", type=["zip"], key=settings.UPLOAD_WIDGET,
                                max_upload_size=settings.MAX_UPLOAD_BYTES // 2**20,
                                help="A checkpoint folder as training writes it (config.json, model.safetensors "
                                     "and the tokenizer files), or a Hugging Face folder of a family this app "
                                     "reads (Marian, T5, BART, mBART-50, NLLB: config.json, the weights and the "
                                     "tokenizer's files)")
    if uploaded is None:
        return
    data = uploaded.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    done = st.session_state.setdefault(UPLOADS, {})
    if digest not in done:
        name = Path(uploaded.name).stem or "upload"
        slot = f"checkpoint upload {name}"  # a new upload of the same name replaces the old one and its folder
        forget(slot)
        destination = session_tempdir(slot, prefix="transformer-upload-")
        cap = settings.upload_bytes_per_session()  # one upload never passes the session's bytes
        try:
            folder = extract_checkpoint_zip(data, destination, min(cap, settings.MAX_EXTRACTED_BYTES) or None)
            preload(folder)  # sizes checked from the weights' header first; a clear message if wrong
            label = register_trained_model(name, folder, origin="uploaded")
            removed = keep_upload(Kept(slot, label, digest, folder_bytes(destination)))
            done[digest] = ("ok", label, removed_note(removed))
        except LOAD_ERRORS as error:  # a message, never a traceback (ui/models/menu.py)
            release(slot)
            # the server's temporary path means nothing to the user (and is not theirs to see)
            message = load_error_text(error)
            for path in (str(destination.resolve()), str(destination)):
                message = message.replace(path, uploaded.name)
            done[digest] = ("error", message, "")
    status, message, note = done[digest]
    if status == "error":
        st.error(f"Not a usable checkpoint: {message}")
    else:
        st.success(f"Loaded as “{session_menu_text(message)}”.")
        if note:
            st.info(note)


def _open() -> None:
    """The "Open" button: check and load the typed folder; the result is said under the widget."""
    try:
        st.session_state[OPENED] = ("ok", open_folder(st.session_state.get(settings.OPEN_WIDGET) or ""))
    except LOAD_ERRORS as error:  # a message, never a traceback (ui/models/menu.py)
        message = load_error_text(error)
        st.session_state[OPENED] = ("error", message[:400] + ("..." if len(message) > 400 else ""))


def open_folder_widget() -> None:
    """A model folder on the server's disk, by its path (or its name under the models folder)."""
    st.text_input("Or open a model folder on the server", key=settings.OPEN_WIDGET,
                  placeholder="/path/to/opus-mt-en-de",
                  help="The path of a checkpoint folder or of a Hugging Face folder (Marian, T5, BART, mBART-50, "
                       "NLLB) on the machine that runs the app; a bare name is looked up in the models folder.")
    st.button("Open", key=settings.OPEN_BUTTON, on_click=_open)
    result = st.session_state.get(OPENED)
    if result is not None:
        status, message = result
        if status == "error":
            st.error(f"Cannot open this folder: {message}")
        else:
            st.success(f"Opened as “{session_menu_text(message)}”.")
