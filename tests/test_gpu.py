"""Every package path, and every page of the app, on the GPU: ``python -m pytest -m gpu`` on a machine with CUDA.

Each shipped model of pretrained/ is loaded on the CPU and on the test device (conftest.py's ``gpu_device``:
$TRANSFORMER_TEST_DEVICE, default "cuda"; skipped where that is CUDA and the machine has none) and put through
decoding (greedy, beam search, sampling, a recorded trace), every attribution method (each option of each),
both head importances, the pruning curve, activation patching, the randomization check, attention rollout,
the logit lens and the residual stream; where the answer is cheap to compare, the device's answer must match
the CPU's to a tolerance (float32 sums run in another order on a GPU). So is a Hugging Face folder of each family
(T5 v1.0 and v1.1, BART, mBART-50, NLLB: the trained tiny folders of ``family_folders``), and on the device
each family's random float64 folder gives ``transformers``' CPU logits to 1e-9 and its trained folder
``generate()``'s greedy translations. Then every page of the app runs on the tiny checkpoints with the sidebar's
device on the test device.

TRANSFORMER_TEST_DEVICE=cpu runs the same code on the CPU (a dry run of the tests themselves).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest
import torch
from app_helpers import assert_clean, open_page
from family_folders import LANGUAGES, generated, random_folder, texts
from family_models import NAMES
from torch import Tensor

from transformer.explain import (
    METHODS,
    REGISTRY,
    activation_patching,
    attribute,
    head_summary,
    logit_lens,
    pruning_curve,
    randomization_check,
    residual_stream,
    source_share,
)
from transformer.explain.attribution import CONTRASTIVE_METHODS
from transformer.explain.gradients import BASELINES, INTEGRATIONS
from transformer.explain.heads import IMPORTANCE_METHODS
from transformer.explain.pruning import BY
from transformer.explain.rollout import attention_rollout, encoder_decoder_rollout
from transformer.network.trace import Trace
from transformer.pipeline import Pipeline, load_pretrained
from transformer.text.ids import pad, target_ids
from ui.state import settings

pytestmark = [pytest.mark.gpu, pytest.mark.filterwarnings("ignore::transformer.pipeline.UnknownCharactersWarning")]

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (ROOT / "pretrained").iterdir() if (p / "config.json").is_file())
TEXTS = {"numbers-en-de": ("three hundred and twelve", "seven"), "reverse": ("abc123", "xy"),
         "dates-de": ("2026-11-21", "1901-01-02"),
         "sentences-en-de": ("the dog sleeps because the man sees the cat", "the cat sleeps")}  # (input, another)
# every option of every method, each value run once (the others at their defaults; IG on 8 points but where
# n_steps itself is the option)
OPTION_VALUES = {"n_steps": [None, 8], "internal_batch_size": [None, 3], "integration": list(INTEGRATIONS),
                 "baseline": list(BASELINES), "layer": [None, -1]}
OPTION_CASES = [(m, option, value) for m in METHODS for option in REGISTRY[m].options
                for value in OPTION_VALUES.get(option, [])]


def close(on_device: Tensor | float, on_cpu: Tensor | float, what: str, atol: float | None = None) -> None:
    """The device's answer matches the CPU's: within ``atol`` (default 1e-3 of the CPU's largest magnitude), NaN
    where it is NaN."""
    got, want = torch.as_tensor(on_device).cpu().double(), torch.as_tensor(on_cpu).double()
    if atol is None:
        atol = 1e-3 * (float(want.nan_to_num().abs().max()) if want.numel() else 0.0) + 1e-6
    torch.testing.assert_close(got, want, rtol=1e-3, atol=atol, equal_nan=True, msg=what)


class Loaded:
    """One shipped model (or a family's folder) on the CPU and on the test device, with one sentence's ids (on
    the CPU)."""

    def __init__(self, folder: Path, device: str) -> None:
        self.cpu: Pipeline = load_pretrained(folder)
        self.dev: Pipeline = load_pretrained(folder, device=device)
        self.text, self.other = TEXTS.get(folder.name, ("the house", "hello world") if FAMILY in folder.name
                                          else ("abc", "ab"))
        self.output = self.cpu.translate(self.text)
        self.src = pad([self.cpu.source_ids(self.text)[1]])  # (1, S)
        self.tgt = pad([target_ids(self.cpu.tgt_tokenizer, self.output)])  # (1, T)

    def on_device(self, *tensors: Tensor) -> list[Tensor]:
        return [t.to(self.dev.device) for t in tensors]


FAMILY = "-trained"  # the name of a family's trained folder ends so (family_folders.trained_folder)


@cache
def loaded(folder: Path, device: str) -> Loaded:
    return Loaded(folder, device)


@pytest.fixture(params=[*SHIPPED, *(f"family:{name}" for name in NAMES)])
def shipped(request: pytest.FixtureRequest, gpu_device: str) -> Loaded:
    name = request.param
    if name.startswith("family:"):  # built once per session (conftest.trained_family_folder)
        return loaded(request.getfixturevalue("trained_family_folder")(name.removeprefix("family:")), gpu_device)
    return loaded(ROOT / "pretrained" / name, gpu_device)


def test_the_models_are_on_the_device(shipped: Loaded, gpu_device: str) -> None:
    assert shipped.dev.device.type == torch.device(gpu_device).type
    assert all(p.device.type == torch.device(gpu_device).type for p in shipped.dev.model.parameters())


def test_logits(shipped: Loaded) -> None:
    src, tgt = shipped.on_device(shipped.src, shipped.tgt)
    with torch.no_grad():
        close(shipped.dev.model(src, tgt), shipped.cpu.model(shipped.src, shipped.tgt), "logits")


@pytest.mark.parametrize("name", NAMES)
def test_each_family_folder_equals_transformers_on_the_device(name: str, family_tokenizers: dict[str, Path],
                                                              trained_family_folder, tmp_path: Path,  # noqa: ANN001
                                                              gpu_device: str) -> None:
    """float64 on the device against transformers' float64 on the same device (like with like: T5's RMSNorm takes
    its statistic in float32 in both, and a float32 sum differs between devices by its rounding, 2.8e-6 in the
    logits measured against the CPU); greedy on the device against generate()."""
    from transformers import AutoModelForSeq2SeqLM

    folder, _ = random_folder(name, family_tokenizers, tmp_path)
    pipe = load_pretrained(folder, device=gpu_device, dtype=torch.float64)
    theirs = AutoModelForSeq2SeqLM.from_pretrained(folder, dtype=torch.float64).to(gpu_device).eval()
    src = pipe.encode_source(["the house is small.", "hello world"], warn=False)  # (2, S)
    tgt = torch.tensor([[pipe.config.bos_id, 5, 6, 7]] * 2, device=src.device)  # (2, 4): ordinary pieces
    with torch.no_grad():
        want = theirs(input_ids=src, attention_mask=(src != pipe.config.pad_id).long(), decoder_input_ids=tgt).logits
        got = pipe.model(src, tgt)
    # float64 everywhere but T5's float32 statistic: on one device both compute it with the same reduction, yet a
    # kernel may sum a differently laid-out tensor in another order, one float32 ulp per norm at most; each such
    # ulp moves the logits by at most eps32 times their size, so the bound is (norms + 1) * eps32 * max|logit|,
    # and float64 rounding (1e-9, as on the CPU) for the families with no float32 statistic
    norms = sum(1 for module in pipe.model.modules() if type(module).__name__ == "RMSNorm")
    bound = (norms + 1) * torch.finfo(torch.float32).eps * want.abs().max().item() if norms else 1e-9
    assert (got - want).abs().max().item() < bound
    sentences = texts(32, seed=11, high=2)
    trained = trained_family_folder(name)
    src_lang, tgt_lang = LANGUAGES.get(name, (None, None))
    dev = load_pretrained(trained, device=gpu_device, src_lang=src_lang, tgt_lang=tgt_lang)
    assert dev.translate(sentences) == generated(trained, name, sentences, num_beams=1)[0]


def test_decoding(shipped: Loaded) -> None:
    dev, cpu, text = shipped.dev, shipped.cpu, shipped.text
    assert dev.translate(text) == shipped.output  # greedy
    assert dev.translate([text, shipped.other]) == cpu.translate([text, shipped.other])  # a padded batch
    for options in ({"beam_size": 3}, {"beam_size": 2, "length_penalty": 1.0, "early_stopping": True}):
        assert dev.translate(text, **options) == cpu.translate(text, **options), options
    for options in ({"temperature": 0.7, "seed": 1}, {"top_k": 3, "seed": 2}, {"top_p": 0.9, "seed": 3}):
        first = dev.translate(text, **options)
        assert isinstance(first, str) and dev.translate(text, **options) == first, options  # reproducible
    traced, reference = dev.trace(text), cpu.trace(text)
    assert traced.output_text == reference.output_text
    assert dev.trace(text, temperature=0.5, seed=4).output_text is not None


def test_every_method(shipped: Loaded) -> None:
    src, tgt = shipped.on_device(shipped.src, shipped.tgt)
    for method in METHODS:
        got = attribute(shipped.dev.model, src, tgt, method)
        want = attribute(shipped.cpu.model, shipped.src, shipped.tgt, method)
        assert got.source.device.type == shipped.dev.device.type
        close(got.source, want.source, f"{method}: source")
        if want.target is not None:
            close(got.target, want.target, f"{method}: target")
        if method == "alti":
            close(source_share(got.source), source_share(want.source), "alti: source share")


@pytest.mark.parametrize("method", CONTRASTIVE_METHODS)
def test_every_contrastive_method_with_a_contrast(shipped: Loaded, method: str) -> None:
    contrast = shipped.tgt[:, 1:].roll(1, dims=1)  # (1, T-1): another token at each row
    src, tgt, contrast_dev = shipped.on_device(shipped.src, shipped.tgt, contrast)
    options = {"n_steps": 8} if method == "integrated_gradients" else {}
    got = attribute(shipped.dev.model, src, tgt, method, contrast_ids=contrast_dev, **options)
    want = attribute(shipped.cpu.model, shipped.src, shipped.tgt, method, contrast_ids=contrast, **options)
    close(got.source, want.source, f"{method} with contrast_ids")


@pytest.mark.parametrize(("method", "option", "value"), OPTION_CASES)
def test_every_option(shipped: Loaded, method: str, option: str, value: object) -> None:
    options = {"n_steps": 8, option: value} if "n_steps" in REGISTRY[method].options else {option: value}
    src, tgt = shipped.on_device(shipped.src, shipped.tgt)
    got = attribute(shipped.dev.model, src, tgt, method, **options)
    want = attribute(shipped.cpu.model, shipped.src, shipped.tgt, method, **options)
    close(got.source, want.source, f"{method} {options}")


def test_every_option_has_values_here() -> None:
    """A new option of a method needs its values in OPTION_VALUES, so that the GPU run covers it."""
    missing = {(m, o) for m in METHODS for o in REGISTRY[m].options if not OPTION_VALUES.get(o)}
    assert not missing, f"add values for {sorted(missing)} to OPTION_VALUES"


@pytest.mark.parametrize("importance", IMPORTANCE_METHODS)
def test_head_importances_and_pruning(shipped: Loaded, importance: str) -> None:
    src, tgt = shipped.on_device(shipped.src, shipped.tgt)
    got = head_summary(shipped.dev.model, src, tgt, importance=importance)
    want = head_summary(shipped.cpu.model, shipped.src, shipped.tgt, importance=importance)
    columns = [c for c in ("importance", "importance_gradient", "entropy") if c in want.columns]
    assert columns and list(got.columns) == list(want.columns)
    for column in columns:
        close(torch.tensor(got[column].to_numpy(float)), torch.tensor(want[column].to_numpy(float)), column)
    for by, column in BY.items():
        if column in got.columns and got[column].notna().all():
            curve = pruning_curve(shipped.dev.model, src, tgt, got, by=by)
            assert isinstance(curve, pd.DataFrame) and len(curve) > 1, by


def patching_case(loaded: Loaded) -> tuple[Tensor, int]:
    """A corrupted source (one token replaced) and an output row where the corruption moves the logit difference
    most (on the CPU), so that the effects divide by a clear difference: (corrupt (1, S), position)."""
    model, src, dec = loaded.cpu.model, loaded.src, loaded.tgt[:, :-1]
    best = (-1.0, src, 0)
    with torch.no_grad():
        clean = model(src, dec)[0]  # (T-1, V)
        for index in range(src.size(1) - 1):  # every token but </s>
            corrupt = src.clone()
            corrupt[0, index] = 4 if int(src[0, index]) != 4 else 5  # another ordinary token
            moved = (clean - model(corrupt, dec)[0]).gather(1, loaded.tgt[0, 1:, None]).abs().max(0)
            if float(moved.values) > best[0]:
                best = (float(moved.values), corrupt, int(moved.indices))
    return best[1], best[2]


def test_activation_patching(shipped: Loaded) -> None:
    corrupt, position = patching_case(shipped)
    src, bad, tgt = shipped.on_device(shipped.src, corrupt, shipped.tgt)
    got = activation_patching(shipped.dev.model, src, bad, tgt, position)
    want = activation_patching(shipped.cpu.model, shipped.src, corrupt, shipped.tgt, position)
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    close(torch.tensor(got["effect"].to_numpy(float)), torch.tensor(want["effect"].to_numpy(float)), "effect")


def test_randomization_check(shipped: Loaded) -> None:
    """The same seed draws the same random weights on every device (a CPU generator, copied over)."""
    src, tgt = shipped.on_device(shipped.src, shipped.tgt)
    methods = ["attention", "saliency"]
    got = randomization_check(shipped.dev.model, src, tgt, methods, seed=5)
    want = randomization_check(shipped.cpu.model, shipped.src, shipped.tgt, methods, seed=5)
    assert got[["method", "layers_randomized", "randomized"]].equals(want[["method", "layers_randomized",
                                                                          "randomized"]])
    # Spearman's ρ over ranks: a near-tie that rounds the other way on the GPU may swap two ranks
    close(torch.tensor(got.rank_correlation.to_numpy(float)), torch.tensor(want.rank_correlation.to_numpy(float)),
          "rank correlation", atol=0.02)


def test_rollout_lens_and_residual_stream(shipped: Loaded) -> None:
    src, tgt = shipped.on_device(shipped.src, shipped.tgt)
    traces = []
    for model, s, t in ((shipped.dev.model, src, tgt), (shipped.cpu.model, shipped.src, shipped.tgt)):
        trace = Trace()
        with torch.no_grad():
            model(s, t, trace=trace)
        traces.append(trace)
    close(attention_rollout(traces[0]), attention_rollout(traces[1]), "encoder rollout")
    for got, want in zip(encoder_decoder_rollout(traces[0]), encoder_decoder_rollout(traces[1]), strict=True):
        close(got, want, "encoder-decoder rollout")
    close(logit_lens(shipped.dev.model, src, tgt), logit_lens(shipped.cpu.model, shipped.src, shipped.tgt),
          "logit lens")
    got = residual_stream(shipped.dev.model, src, tgt)
    want = residual_stream(shipped.cpu.model, shipped.src, shipped.tgt)
    for column in ("update_norm", "stream_norm"):
        close(torch.tensor(got[column].to_numpy(float)), torch.tensor(want[column].to_numpy(float)), column)


# --- the app, with the sidebar's device on the test device ---------------------------------------------------

PAGES = sorted(p.stem for p in (ROOT / "pages").glob("*.py"))


def click(at, key: str) -> None:  # noqa: ANN001  (an AppTest)
    """Press the button ``key`` where the page draws one (a costly step waits for it on some models)."""
    if any(b.key == key for b in at.button):
        at.button(key=key).click().run()
        assert_clean(at)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_on_the_device(tiny_models_dir: Path, monkeypatch: pytest.MonkeyPatch, gpu_device: str,
                                  page: str) -> None:
    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tiny_models_dir))
    state = {settings.DEVICE: gpu_device}
    if page == "7_patching":
        from ui.sections import heads_navigation as navigation

        state |= {navigation.CORRUPT: "abd12", navigation.CORRUPT_FOR: "abc12"}
    at = open_page(page, "abc12", **state)
    assert_clean(at)
    assert at.sidebar.selectbox(key=settings.DEVICE_WIDGET).value == gpu_device  # the sidebar kept the choice
    if page == "1_model":
        click(at, "model_parity_run")
    elif page == "4_attention":
        for view in ("lines", "scores", "row"):
            at.radio(key="attn_view").set_value(view).run()
            assert_clean(at)
    elif page == "5_explain":
        for section in ("agreement", "source", "alignment", "sanity", "lens", "residual"):
            at.get("button_group")[-1].set_value(section).run()
            assert_clean(at)
            click(at, {"alignment": "explain_aer_run", "sanity": "explain_sanity_run"}.get(section, "-"))
    elif page == "6_heads":
        click(at, "heads_run")
        at.radio(key="heads_importance").set_value("gradient").run()
        assert_clean(at)
        click(at, "heads_pruning_run")
    elif page == "9_decoding":
        for method in ("Beam search", "Sampling", "Greedy"):
            at.radio(key="dec_method").set_value(method).run()
            assert_clean(at)
    assert at.session_state[settings.DEVICE] == gpu_device
