"""Uploaded checkpoints: unpacking a zipped checkpoint folder safely, and the sidebar's upload widget."""

from __future__ import annotations

import hashlib
import io
import zipfile
import zlib
from pathlib import Path

import streamlit as st

from transformer.checkpoint import CONFIG_FILE, WEIGHTS_FILE, CheckpointError
from transformer.pipeline import load_pretrained
from ui import settings
from ui.models import register_trained_model
from ui.tempdirs import release, session_tempdir

UPLOADS = "_uploads"  # session_state: sha256 of an uploaded file -> ("ok", menu label) or ("error", message)


class UploadError(ValueError):
    """An uploaded .zip that is not a usable checkpoint folder; the message says why."""


def extract_checkpoint_zip(data: bytes, destination: Path) -> Path:
    """Unpack a zipped checkpoint folder safely into ``destination``; return the checkpoint folder.

    Refuses archives that are too large (packed or unpacked; ``settings.MAX_UPLOAD_BYTES``,
    ``MAX_EXTRACTED_BYTES``), have too many entries (``MAX_ZIP_ENTRIES``), hold links or paths
    that leave ``destination`` (zip slip), or lack config.json and model.safetensors side by
    side (at the top or in one folder).
    """
    max_upload, max_extracted = settings.MAX_UPLOAD_BYTES, settings.MAX_EXTRACTED_BYTES
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
        if (folder / WEIGHTS_FILE).is_file():
            return folder
    raise UploadError(f"the zip must hold a checkpoint folder: {CONFIG_FILE} and {WEIGHTS_FILE} side by side")


def upload_widget() -> None:
    """The uploader: a new .zip is unpacked, loaded once and becomes the current model."""
    uploaded = st.file_uploader("A zipped checkpoint folder", type=["zip"], key=settings.UPLOAD_WIDGET,
                                help="config.json, model.safetensors and the tokenizer files, as training writes them")
    if uploaded is None:
        return
    data = uploaded.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    done = st.session_state.setdefault(UPLOADS, {})
    if digest not in done:
        name = Path(uploaded.name).stem or "upload"
        slot = f"checkpoint upload {name}"  # a new upload of the same name replaces the old one and its folder
        destination = session_tempdir(slot, prefix="transformer-upload-")
        try:
            folder = extract_checkpoint_zip(data, destination)
            load_pretrained(folder)  # sizes checked from the weights' header first; a clear message if wrong
            done[digest] = ("ok", register_trained_model(name, folder, origin="uploaded"))
        except (UploadError, CheckpointError, ValueError, OSError, RuntimeError, MemoryError) as error:
            release(slot)
            # the server's temporary path means nothing to the user (and is not theirs to see)
            message = str(error).replace(str(destination.resolve()), uploaded.name).replace(str(destination),
                                                                                            uploaded.name)
            done[digest] = ("error", message)
    status, message = done[digest]
    if status == "error":
        st.error(f"Not a usable checkpoint: {message}")
    else:
        st.success(f"Loaded as “{message}”.")
