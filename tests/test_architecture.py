"""ui.sections.architecture: figure 1 of the paper as SVG with a model's sizes, checked as an XML document: the
sizes are written, nothing is under 14 px, every line fits its box, and the drawing stays in its canvas."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from transformer.network.config import TransformerConfig
from ui.figures.text_size import text_width
from ui.sections import architecture as arch

SVG = "{http://www.w3.org/2000/svg}"
CONFIGS = [
    TransformerConfig(src_vocab_size=43, tgt_vocab_size=43, d_model=64, n_heads=4, n_layers=2, d_ff=256),
    TransformerConfig(src_vocab_size=37000, tgt_vocab_size=37000, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
                      norm_first=True, activation="gelu"),  # the paper's base model, pre-LN
]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on a malformed document (an unescaped "<s>", say)


def texts(root: ET.Element) -> list[str]:
    return [" ".join(part.strip() for part in node.itertext()) for node in root.iter(f"{SVG}text")]


@pytest.mark.parametrize("config", CONFIGS, ids=["shipped size", "paper base"])
@pytest.mark.parametrize("font_px", [arch.FONT_PX, arch.PRESENTATION_FONT_PX])
def test_diagram_writes_the_models_sizes(config: TransformerConfig, font_px: float) -> None:
    root = parse(arch.architecture_svg(config, font_px=font_px))
    words = " ".join(texts(root)).replace(arch.NBSP, " ")
    c = config
    for expected in (f"Embedding {c.src_vocab_size}x{c.d_model}", f"{c.n_heads} heads, d_k {c.d_k}",
                     f"Feed-forward {c.d_model} -> {c.d_ff} -> {c.d_model} ({c.activation})",
                     f"{c.n_encoder_layers} x", f"Linear {c.d_model} -> {c.tgt_vocab_size}", "<s> y1 y2"):
        assert expected in words
    assert ("LayerNorm before, Add after" in words) == c.norm_first


@pytest.mark.parametrize("font_px", [arch.FONT_PX, arch.PRESENTATION_FONT_PX])
def test_no_text_under_14px_and_every_line_fits_its_box(font_px: float) -> None:
    root = parse(arch.architecture_svg(CONFIGS[1], font_px=font_px))
    assert float(root.get("font-size")) >= 14
    assert all(float(node.get("font-size", font_px)) >= 14 for node in root.iter(f"{SVG}text"))
    for span in root.iter(f"{SVG}tspan"):  # box text: one tspan per line
        assert text_width(span.text.replace("&", "&amp;").replace("<", "&lt;"), font_px) <= arch.BOX_WIDTH - 4


def test_boxes_stay_in_the_canvas_and_columns_do_not_touch() -> None:
    svg = arch.architecture_svg(CONFIGS[0])
    root = parse(svg)
    _, _, width, height = map(float, root.get("viewBox").split())
    assert width == arch.WIDTH
    boxes = [(float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")))
             for r in root.iter(f"{SVG}rect")]
    assert len(boxes) == 7 + 11 + 2  # encoder boxes, decoder boxes, the two "N x" frames
    for x, y, w, h in boxes:
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height
    encoder_right = arch.COLUMN_X[0] + arch.BOX_WIDTH / 2
    decoder_left = arch.COLUMN_X[1] - arch.BOX_WIDTH / 2
    assert decoder_left - encoder_right >= 30  # room for the memory arrow between the frames
    assert svg.count("<line") == (7 - 1) + (11 - 1) + 1  # one arrow between boxes, one from memory


def test_rows_are_level_and_inputs_are_at_the_bottom() -> None:
    root = parse(arch.architecture_svg(CONFIGS[0]))
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("stroke") == "#333"]
    encoder = [r for r in rects if float(r.get("x")) < arch.WIDTH / 2]
    decoder = [r for r in rects if float(r.get("x")) >= arch.WIDTH / 2]
    for enc, dec in zip(encoder, decoder, strict=False):  # row by row, from the bottom
        assert enc.get("y") == dec.get("y")
    ys = [float(r.get("y")) for r in decoder]
    assert ys == sorted(ys, reverse=True)  # each next box higher up: the paper's bottom-to-top flow


def test_the_layer_counts_beside_the_frames_stay_in_the_canvas() -> None:
    deep = TransformerConfig(src_vocab_size=10, tgt_vocab_size=10, d_model=8, n_heads=2, n_layers=12, d_ff=16)
    for font_px in (arch.FONT_PX, arch.PRESENTATION_FONT_PX):
        root = parse(arch.architecture_svg(deep, font_px=font_px))
        labels = [t for t in root.iter(f"{SVG}text") if (t.text or "").endswith(" x")]
        assert [t.text for t in labels] == ["12 x", "12 x"]
        for label in labels:
            x, width = float(label.get("x")), text_width(label.text, font_px)
            left, right = (x - width, x) if label.get("text-anchor") == "end" else (x, x + width)
            assert 0 <= left and right <= arch.WIDTH


def test_the_early_diagram_reads_no_config_over_the_cap(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``first_config`` reads config.json through ``read_capped_text``: one over ``MAX_CONFIG_BYTES``, even a valid
    one, is not read (None: the page waits for the model), so a huge file in the models folder cannot stall the
    Model page's first run; one under the cap still gives the diagram's config."""
    import json

    from transformer.checkpoints.file_caps import MAX_CONFIG_BYTES
    from ui.state import settings

    monkeypatch.setenv(settings.MODELS_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(arch.st, "query_params", {})  # no link: the first folder, "a-model"
    config = tmp_path / "a-model" / "config.json"
    config.parent.mkdir()
    document = {"model": CONFIGS[0].to_dict(), "meta": {"note": ""}}
    config.write_text(json.dumps(document))
    assert arch.first_config() == CONFIGS[0]
    document["meta"]["note"] = "x" * MAX_CONFIG_BYTES  # valid JSON, just over the cap
    config.write_text(json.dumps(document))
    assert arch.first_config() is None
    with open(config, "r+b") as file:  # 8 GB (sparse: no disk used), refused from its size alone
        file.truncate(8 * 2**30)
    assert arch.first_config() is None
