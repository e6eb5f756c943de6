"""What every page shares: the chosen model, the input sentence, the device, and the sidebar that sets them.

Every page begins with

    from ui import state
    app = state.sidebar()           # draws the shared sidebar, returns the choices
    result = app.require_analysis() # the input's tokens, translation and Trace (or a warning and stop)

``app.pipeline`` is the loaded ``transformer.pipeline.Pipeline``; ``app.analysis()`` is the
greedy translation of ``app.text`` with the Trace of its teacher-forced forward pass. Both
are cached across pages, reruns and browser sessions (``st.cache_resource``, keyed by the
model's id, the device and the text) and are never modified after they are built.

Why each page draws the sidebar itself rather than ``app.py``: under
``streamlit.testing.v1.AppTest`` a page of an app with a ``pages/`` folder is run through
the legacy pages mechanism, without the entry point, so a sidebar drawn by ``app.py``
would be missing there. A page that calls ``sidebar()`` has it in the browser and in tests.

The choices live in plain ``st.session_state`` keys (``MODEL``, ``TEXT``, ``DEVICE``); the
widgets have their own keys and are re-seeded from the plain ones on every run, because a
widget's value does not survive a page on which it is not drawn.

Other pages add models with ``register_trained_model(name, pipeline_or_folder)``. A run of the
Training page (``ui.training_job``) ends in a thread that cannot touch ``st.session_state``:
``sidebar()`` registers it on the next script run of whatever page is shown.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import uuid
import warnings
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import streamlit as st
import torch

from transformer.checkpoint import CONFIG_FILE, WEIGHTS_FILE, CheckpointError
from transformer.network.trace import Trace
from transformer.pipeline import Pipeline, TranslationTrace, load_pretrained
from ui import training_job

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR_ENV = "TRANSFORMER_APP_MODELS_DIR"  # a folder of checkpoint folders; default ROOT/pretrained
RUNS_DIR_ENV = "TRANSFORMER_APP_RUNS_DIR"  # where runs started on the Training page are written; default ROOT/runs/app

# Plain session_state keys: the choices, shared by every page of one browser session.
MODEL, TEXT, DEVICE = "model", "input_text", "device"
SESSION_MODELS = "session_models"  # label -> ModelEntry: models trained or uploaded in this session
LAST_TRAINED = "last_trained_model"  # the menu label of the latest run registered in this session
# Widget keys (tests use them to find the widgets).
MODEL_WIDGET, TEXT_WIDGET, EXAMPLE_WIDGET, DEVICE_WIDGET, UPLOAD_WIDGET = (
    "model_select", "text_input", "example_select", "device_select", "checkpoint_upload")

MAX_UPLOAD_BYTES = 100 * 2**20  # a shipped checkpoint is a few MB
MAX_EXTRACTED_BYTES = 300 * 2**20
MAX_ZIP_ENTRIES = 1000
MAX_INPUT_CHARS = 500
N_EXAMPLES = 8
RECORD_TOP_K = 8  # next-token candidates recorded per decoding step, by greedy, beam search and sampling alike


# --- which models there are --------------------------------------------------------------


@dataclass(frozen=True)
class ModelEntry:
    """One choice of the model menu. ``key`` is unique and stable: the caches are keyed by it."""

    label: str
    key: str
    origin: str  # "shipped", "trained" or "uploaded"
    folder: Path | None = None
    pipeline: Pipeline | None = field(default=None, compare=False, repr=False)  # an in-memory model


def models_dir() -> Path:
    """Where the shipped checkpoint folders are: $TRANSFORMER_APP_MODELS_DIR or pretrained/."""
    return Path(os.environ.get(MODELS_DIR_ENV) or ROOT / "pretrained")


def runs_dir() -> Path:
    """Where the Training page writes its runs: $TRANSFORMER_APP_RUNS_DIR or runs/app."""
    return Path(os.environ.get(RUNS_DIR_ENV) or ROOT / "runs" / "app")


def _stamp(folder: Path) -> str:
    """Changes when a checkpoint folder is rewritten, so a retrained folder is reloaded."""
    parts = []
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        try:
            stat = (folder / name).stat()
            parts.append(f"{stat.st_mtime_ns}-{stat.st_size}")
        except OSError:
            parts.append("missing")
    return "/".join(parts)


def shipped_models(directory: Path | None = None) -> list[ModelEntry]:
    """Every checkpoint folder (one holding config.json) directly under ``directory``, by name."""
    directory = models_dir() if directory is None else directory
    if not directory.is_dir():
        return []
    folders = sorted(p for p in directory.iterdir() if p.is_dir() and (p / CONFIG_FILE).is_file())
    return [ModelEntry(p.name, f"folder:{p.resolve()}@{_stamp(p)}", "shipped", p.resolve()) for p in folders]


def _session_models() -> dict[str, ModelEntry]:
    return st.session_state.setdefault(SESSION_MODELS, {})


def register_trained_model(name: str, pipeline_or_folder: Pipeline | str | os.PathLike, *, select: bool = True,
                           origin: str = "trained") -> str:
    """Make a model trained (or uploaded) in this browser session selectable; returns its menu label.

    ``pipeline_or_folder``: an in-memory ``Pipeline`` (used as it is, on its own device) or a
    checkpoint folder (loaded, cached, on the sidebar's device). Registering a name again
    replaces the earlier model of that name. ``select=True`` makes it the current model and
    resets the input to one of its examples.
    """
    suffix = "trained here" if origin == "trained" else origin
    label = f"{name} ({suffix})"
    if isinstance(pipeline_or_folder, Pipeline):
        entry = ModelEntry(label, f"session:{uuid.uuid4().hex}", origin, pipeline=pipeline_or_folder)
    else:
        folder = Path(pipeline_or_folder).resolve()
        if not (folder / CONFIG_FILE).is_file():
            raise CheckpointError(f"{folder} is not a checkpoint folder (no {CONFIG_FILE})")
        entry = ModelEntry(label, f"folder:{folder}@{_stamp(folder)}", origin, folder)
    _session_models()[label] = entry
    if select:
        _select_model(label)
    return label


def register_finished_training(*, select: bool = False) -> training_job.TrainingJob | None:
    """Register this session's training run once it has ended; returns the job if this call handled it.

    A finished or stopped run becomes a model of the menu (``job.registered_label``; current if
    ``select``); a checkpoint that cannot be loaded sets ``job.registration_error``; a failed run
    only gets marked. Either way it is handled once (``job.registered``).
    """
    job = training_job.session_job()
    if job is None or not job.done or job.registered:
        return None
    job.registered = True
    if job.status == training_job.FAILED or job.result is None:
        return job
    try:
        label = register_trained_model(job.name, job.result.out, select=select)
    except (CheckpointError, ValueError, OSError) as error:
        job.registration_error = str(error)
        return job
    job.registered_label = st.session_state[LAST_TRAINED] = label
    return job


def available_models() -> list[ModelEntry]:
    """The menu: shipped models first, then this session's trained and uploaded ones."""
    return [*shipped_models(), *_session_models().values()]


def _select_model(label: str) -> None:
    st.session_state[MODEL] = label
    st.session_state[TEXT] = None  # the next run puts the new model's first example in


# --- loading and computing (cached, never mutated) ---------------------------------------


def devices() -> list[str]:
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


@st.cache_resource(max_entries=8, show_spinner="Loading the model...")
def _load_folder(folder: str, stamp: str, device: str) -> Pipeline:
    """One Pipeline per (folder, version, device), shared by every session."""
    return load_pretrained(folder, device=device)


def load_pipeline(entry: ModelEntry, device: str) -> Pipeline:
    """The entry's pipeline: loaded from its folder (cached), or the in-memory one as it is."""
    if entry.pipeline is not None:
        return entry.pipeline
    assert entry.folder is not None
    return _load_folder(str(entry.folder), _stamp(entry.folder), device)


@dataclass(frozen=True)
class Analysis:
    """One input sentence through the model: what the pages draw.

    ``trace`` is the teacher-forced forward on the source and the decoder input
    ``<s> y_1 .. y_n`` (the greedy output): ``src_tokens`` label its source positions,
    ``decoder_tokens`` its decoder positions; position t predicts ``output_tokens[t]``.
    """

    text: str  # the cleaned input
    result: TranslationTrace
    src_tokens: list[str]
    decoder_tokens: list[str]
    output_text: str

    @property
    def trace(self) -> Trace:
        return self.result.trace

    @property
    def src_ids(self) -> list[int]:
        return self.trace["src.ids"][0].tolist()

    @property
    def decoder_ids(self) -> list[int]:
        return self.trace["tgt.ids"][0].tolist()

    @property
    def output_tokens(self) -> list[str]:
        """What each decoder position predicts: y_1 .. y_n, then </s> if decoding finished."""
        predicted = [*self.result.output_pieces, "</s>" if self.result.finished else "(max length)"]
        return predicted[: len(self.decoder_tokens)]


def _analyse_uncached(pipeline: Pipeline, text: str, ablate: dict | None = None) -> Analysis:
    with warnings.catch_warnings():  # unknown characters and truncation are reported from the result
        warnings.simplefilter("ignore")
        result = pipeline.trace(text, ablate=ablate, max_len=_max_output_len(pipeline), record_top_k=RECORD_TOP_K)
    src_vocab, tgt_vocab = pipeline.src_tokenizer, pipeline.tgt_tokenizer
    src_tokens = [src_vocab.id_to_piece(int(i)) for i in result.trace["src.ids"][0]]
    decoder_tokens = [tgt_vocab.id_to_piece(int(i)) for i in result.trace["tgt.ids"][0]]
    return Analysis(result.src_text, result, src_tokens, decoder_tokens, result.output_text)


@st.cache_resource(max_entries=256, show_spinner=False)
def _analyse(model_key: str, device: str, text: str, ablate_key: tuple, _pipeline: Pipeline) -> Analysis:
    ablate = {(kind, layer): list(heads) for kind, layer, heads in ablate_key} or None
    return _analyse_uncached(_pipeline, text, ablate)


@st.cache_data(max_entries=64, show_spinner=False)
def _examples(task: str | None, options: dict, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """A few (source, target) pairs of the model's task, freshly generated."""
    from transformer.text.tasks import TASKS, make_task

    if task not in TASKS:
        return []
    try:
        splits = make_task(task, n_train=N_EXAMPLES, n_valid=0, n_test=0, seed=12345,
                           src_lang=src_lang, tgt_lang=tgt_lang, **options)
    except Exception:  # an option this version of data.py does not know: no examples, not a broken app
        return []
    return sorted(splits.train, key=lambda pair: len(pair[0]))


def examples_for(pipeline: Pipeline) -> list[tuple[str, str]]:
    """Example (source, expected target) pairs for a model, from its training meta."""
    meta = pipeline.meta
    given = meta.get("examples")
    if isinstance(given, list) and given:
        return [(str(e[0]), str(e[1])) if isinstance(e, list | tuple) else (str(e), "") for e in given]
    return _examples(meta.get("task"), dict(meta.get("task_options") or {}),
                     str(meta.get("src_lang", "en")), str(meta.get("tgt_lang", "de")))


def _max_output_len(pipeline: Pipeline) -> int:
    """How many tokens decoding may produce: the training data's longest target plus a margin."""
    limit = max(1, pipeline.config.max_len - 1)
    given = pipeline.meta.get("max_output_len")
    return min(limit, int(given)) if isinstance(given, int) and given > 0 else limit


@dataclass(frozen=True)
class BatchAnalysis:
    """A padded batch through the model: (B, S) source and (B, T) decoder ids, their pieces, the Trace."""

    src_ids: torch.Tensor
    tgt_ids: torch.Tensor
    src_pieces: list[list[str]]  # per sentence, without padding
    tgt_pieces: list[list[str]]
    trace: Trace


@st.cache_resource(max_entries=32, show_spinner="Running the batch...")
def _batch(model_key: str, device: str, texts: tuple[str, ...], _pipeline: Pipeline) -> BatchAnalysis:
    from transformer.decoding import greedy_decode
    from transformer.text.ids import EOS_ID

    pipe = _pipeline
    pad = pipe.config.pad_id
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src_ids = pipe.encode_source(list(texts))  # (B, S), padded
    with torch.inference_mode():
        decoded = greedy_decode(pipe.model, src_ids, max_len=_max_output_len(pipe))
        tgt_ids = decoded.ids.clone()  # (B, 1 + T): <s> y_1 .. y_n </s> <pad> ...
        tgt_ids[tgt_ids == EOS_ID] = pad  # the decoder input stops before </s>
        width = int((tgt_ids != pad).sum(dim=1).max())
        tgt_ids = tgt_ids[:, :width][:, : pipe.config.max_len]
        trace = Trace()
        pipe.model(src_ids, tgt_ids, trace=trace)

    def pieces(tokenizer: Any, ids: torch.Tensor) -> list[list[str]]:
        return [[tokenizer.id_to_piece(int(i)) for i in row if int(i) != pad] for row in ids]

    return BatchAnalysis(src_ids, tgt_ids, pieces(pipe.src_tokenizer, src_ids), pieces(pipe.tgt_tokenizer, tgt_ids),
                         trace)


@st.cache_resource(max_entries=8, show_spinner="Copying the weights into torch.nn.Transformer...")
def _reference(model_key: str, device: str, _pipeline: Pipeline) -> torch.nn.Module:
    from transformer.network.interop import to_torch

    return to_torch(_pipeline.model).eval()


@st.cache_resource(max_entries=64, show_spinner=False)
def _parity(model_key: str, device: str, text: str, _pipeline: Pipeline, _analysis: Analysis
            ) -> tuple[torch.Tensor, torch.Tensor]:
    reference = _reference(model_key, device, _pipeline)
    src = _analysis.trace["src.ids"]
    tgt = _analysis.trace["tgt.ids"]
    with torch.inference_mode():
        return _pipeline.model(src, tgt), reference(src, tgt)


@st.cache_resource(max_entries=64, show_spinner=False)
def _ablated_logits(model_key: str, device: str, text: str, ablate_key: tuple, _pipeline: Pipeline,
                    _analysis: Analysis) -> torch.Tensor:
    ablate = {(kind, layer): list(heads) for kind, layer, heads in ablate_key}
    with torch.inference_mode():
        return _pipeline.model(_analysis.trace["src.ids"], _analysis.trace["tgt.ids"], ablate=ablate or None)


@st.cache_resource(max_entries=16, show_spinner="Training the tokenizer...")
def retrained_tokenizer(task: str, options_items: tuple, src_lang: str, tgt_lang: str, kind: str,
                        vocab_size: int, n_pairs: int = 2000) -> Any:
    """A shared tokenizer of another kind or size, trained on ``n_pairs`` pairs of a built-in task."""
    from transformer.text.tasks import make_task
    from transformer.text.tokenizers import build_tokenizers

    splits = make_task(task, n_train=n_pairs, n_valid=0, n_test=0, seed=0, src_lang=src_lang, tgt_lang=tgt_lang,
                       **dict(options_items))
    return build_tokenizers(splits, kind=kind, vocab_size=vocab_size, shared=True)[0]


def _ablate_key(ablate: dict[tuple[str, int], Sequence[int]] | None) -> tuple:
    return tuple(sorted((kind, layer, tuple(sorted(heads))) for (kind, layer), heads in (ablate or {}).items()))


# --- the choices a page gets ---------------------------------------------------------------


@dataclass
class AppContext:
    """The shared choices of this run: model, device, input text (and the model's examples)."""

    model: ModelEntry | None
    pipeline: Pipeline | None
    device: str
    text: str
    examples: list[tuple[str, str]] = field(default_factory=list)

    @property
    def model_key(self) -> str:
        return self.model.key if self.model else ""

    def analysis(self, ablate: dict[tuple[str, int], Sequence[int]] | None = None) -> Analysis | None:
        """The input through the model (cached), or None with a message on the page for bad input."""
        if self.pipeline is None:
            st.warning("No model is loaded: choose or upload one in the sidebar.")
            return None
        if not self.text.strip():
            st.warning("The input sentence is empty: type one in the sidebar or pick an example.")
            return None
        try:
            result = _analyse(self.model_key, self.device, self.text, _ablate_key(ablate), self.pipeline)
        except ValueError as error:  # empty after cleaning, nothing tokenized, a bad ablation
            st.warning(f"Cannot run this input: {error}")
            return None
        if not ablate:
            if result.result.unknown_chars:
                shown = " ".join(repr(c) for c in result.result.unknown_chars)
                st.warning(f"Characters this model's tokenizer never saw became <unk>: {shown}. "
                           "Expect a poor translation.")
            if result.result.truncated:
                st.warning(f"The input is longer than the model's {self.pipeline.config.max_len} positions "
                           "and was cut.")
        return result

    def batch(self, texts: Sequence[str]) -> BatchAnalysis:
        """Several sentences as one padded batch: greedy outputs as decoder inputs, one traced forward."""
        return _batch(self.model_key, self.device, tuple(texts), self.pipeline)

    def parity(self, analysis: Analysis) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits of this model and of its copy built from torch.nn.Transformer on the analysed input."""
        return _parity(self.model_key, self.device, analysis.text, self.pipeline, analysis)

    def ablated_logits(self, analysis: Analysis, ablate: dict[tuple[str, int], Sequence[int]]) -> torch.Tensor:
        """Logits on the analysed input (same decoder input) with the given heads switched off."""
        return _ablated_logits(self.model_key, self.device, analysis.text, _ablate_key(ablate), self.pipeline,
                               analysis)

    def require_model(self) -> None:
        """Stop the page with a message when no model is available or the chosen one did not load."""
        if self.pipeline is not None:
            return
        if self.model is None:
            st.info("No model is available yet. Train one on the **Training** page, upload a checkpoint folder "
                    f"as a .zip in the sidebar, or put checkpoint folders into `{models_dir()}` "
                    f"(or point ${MODELS_DIR_ENV} at a folder of them).")
        else:
            st.error("The chosen model could not be loaded; pick another one in the sidebar.")
        st.stop()

    def require_analysis(self, ablate: dict[tuple[str, int], Sequence[int]] | None = None) -> Analysis:
        """``analysis()``, or stop the page after its message."""
        result = self.analysis(ablate)
        if result is None:
            st.stop()
        return result


def _seed_widget(widget_key: str, value: Any) -> None:
    """Give a widget the shared value before it is drawn (see the module docstring)."""
    st.session_state[widget_key] = value


def _on_model_change() -> None:
    _select_model(st.session_state[MODEL_WIDGET])


def _on_example_change() -> None:
    choice = st.session_state.get(EXAMPLE_WIDGET)
    if choice:
        st.session_state[TEXT] = choice


def _on_text_change() -> None:
    st.session_state[TEXT] = st.session_state[TEXT_WIDGET]


def sidebar(*, require_model: bool = True, select_trained: bool = False) -> AppContext:
    """Draw the shared sidebar (model, upload, input sentence, examples, device) and return the choices.

    With ``require_model`` (every page but training) the page stops with a message when no
    model is available or the chosen one does not load. A training run that ended since the
    last script run joins the model menu, with a toast; ``select_trained`` (the Training page)
    also makes it the current model, where another page keeps the model the user is looking at.
    """
    ended = register_finished_training(select=select_trained)
    if ended is not None and not select_trained:  # the Training page says it in its own words
        if ended.registered_label:
            st.toast(f"Training finished: “{ended.registered_label}” is now in the model menu.",
                     icon=":material/check_circle:")
        elif ended.registration_error:
            st.toast(f"The training run ended but its checkpoint cannot be used: {ended.registration_error}",
                     icon=":material/error:")
        elif ended.status == training_job.FAILED:
            st.toast(f"Training failed: {ended.error}", icon=":material/error:")
    bar = st.sidebar
    model_box = bar.container()
    with bar.expander("Upload a checkpoint (.zip)"):
        _upload_widget()

    entries = {entry.label: entry for entry in available_models()}
    if st.session_state.get(MODEL) not in entries:
        st.session_state[MODEL] = next(iter(entries), None)
        st.session_state[TEXT] = None
    device = st.session_state.get(DEVICE)
    if device not in devices():
        device = st.session_state[DEVICE] = "cpu"

    entry, pipeline = None, None
    if not entries:
        model_box.info(f"No model yet: train one on the Training page, upload a checkpoint, or put checkpoint "
                       f"folders into {models_dir()}.")
    else:
        _seed_widget(MODEL_WIDGET, st.session_state[MODEL])
        model_box.selectbox("Model", list(entries), key=MODEL_WIDGET, on_change=_on_model_change)
        entry = entries[st.session_state[MODEL]]
        try:
            pipeline = load_pipeline(entry, device)
        except (CheckpointError, ValueError, OSError, RuntimeError) as error:
            message = str(error)
            model_box.error(f"Cannot load {entry.label}: {message[:400]}{'...' if len(message) > 400 else ''}")

    examples = examples_for(pipeline) if pipeline is not None else []
    if st.session_state.get(TEXT) is None:  # a new model: start from a mid-length example
        st.session_state[TEXT] = examples[len(examples) // 2][0] if examples else ""
    if examples:
        bar.selectbox("Example sentences", [src for src, _ in examples], index=None, key=EXAMPLE_WIDGET,
                      placeholder="Pick an example", on_change=_on_example_change)
    _seed_widget(TEXT_WIDGET, st.session_state[TEXT])
    bar.text_input("Input sentence", key=TEXT_WIDGET, max_chars=MAX_INPUT_CHARS, on_change=_on_text_change)
    expected = dict(examples).get(st.session_state[TEXT])
    if expected:
        bar.caption(f"Expected output: {expected}")

    _seed_widget(DEVICE_WIDGET, device)
    bar.selectbox("Device", devices(), key=DEVICE_WIDGET,
                  on_change=lambda: st.session_state.update({DEVICE: st.session_state[DEVICE_WIDGET]}))
    if pipeline is not None:
        meta = pipeline.meta
        task = meta.get("task", "unknown task")
        bar.caption(f"Task: {task} · {pipeline.model.num_parameters():,} parameters · "
                    f"device {pipeline.device}")

    app = AppContext(entry, pipeline, device, st.session_state[TEXT], examples)
    if require_model:
        app.require_model()
    return app


@contextmanager
def guard(what: str) -> Iterator[None]:
    """Show an error on the page instead of a traceback when ``what`` fails."""
    try:
        yield
    except (ValueError, KeyError, IndexError, RuntimeError, OSError, CheckpointError) as error:
        st.error(f"{what} failed: {error}")


# --- uploaded checkpoints --------------------------------------------------------------------


class UploadError(ValueError):
    """An uploaded .zip that is not a usable checkpoint folder; the message says why."""


def extract_checkpoint_zip(data: bytes, destination: Path) -> Path:
    """Unpack a zipped checkpoint folder safely into ``destination``; return the checkpoint folder.

    Refuses archives that are too large (packed or unpacked), have too many entries, hold
    links or paths that leave ``destination`` (zip slip), or lack config.json and
    model.safetensors side by side (at the top or in one folder).
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise UploadError(f"the file is {len(data) / 2**20:.1f} MB; the limit is {MAX_UPLOAD_BYTES // 2**20} MB")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise UploadError("this is not a zip file") from None
    root = destination.resolve()
    root.mkdir(parents=True, exist_ok=True)
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_ZIP_ENTRIES:
            raise UploadError(f"the zip holds {len(entries)} entries; the limit is {MAX_ZIP_ENTRIES}")
        if sum(info.file_size for info in entries) > MAX_EXTRACTED_BYTES:
            raise UploadError(f"the zip unpacks to more than {MAX_EXTRACTED_BYTES // 2**20} MB")
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
                        if written > MAX_EXTRACTED_BYTES:
                            raise UploadError(f"the zip unpacks to more than {MAX_EXTRACTED_BYTES // 2**20} MB")
                        out.write(chunk)
            except (zipfile.BadZipFile, RuntimeError, EOFError, zlib.error, NotImplementedError) as error:
                raise UploadError(f"cannot unpack {info.filename!r}: {error}") from None
    configs = sorted((p.parent for p in root.rglob(CONFIG_FILE) if "__MACOSX" not in p.parts),
                     key=lambda p: len(p.parts))
    for folder in configs:
        if (folder / WEIGHTS_FILE).is_file():
            return folder
    raise UploadError(f"the zip must hold a checkpoint folder: {CONFIG_FILE} and {WEIGHTS_FILE} side by side")


def _upload_widget() -> None:
    """The uploader: a new .zip is unpacked, loaded once and becomes the current model."""
    uploaded = st.file_uploader("A zipped checkpoint folder", type=["zip"], key=UPLOAD_WIDGET,
                                help="config.json, model.safetensors and the tokenizer files, as training writes them")
    if uploaded is None:
        return
    data = uploaded.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    done = st.session_state.setdefault("_uploads", {})  # digest -> label or error message
    if digest not in done:
        destination = Path(tempfile.mkdtemp(prefix="transformer-upload-"))
        try:
            folder = extract_checkpoint_zip(data, destination)
            load_pretrained(folder)  # fails here, with a clear message, if the files do not fit together
            name = Path(uploaded.name).stem or "upload"
            done[digest] = ("ok", register_trained_model(name, folder, origin="uploaded"))
        except (UploadError, CheckpointError, ValueError, OSError) as error:
            shutil.rmtree(destination, ignore_errors=True)
            done[digest] = ("error", str(error))
    status, message = done[digest]
    if status == "error":
        st.error(f"Not a usable checkpoint: {message}")
    else:
        st.success(f"Loaded as “{message}”.")


# --- small helpers for the pages ----------------------------------------------------------------


def csv_button(frame: Any, file_name: str, label: str = "Download CSV", *, key: str | None = None) -> None:
    """A download button for the numbers behind a chart."""
    st.download_button(label, frame.to_csv().encode("utf-8"), file_name=file_name, mime="text/csv",
                       key=key or f"csv-{file_name}")
