"""A model's vocabulary as the Tokenization page lists it, built once per model.

Building the table asks the tokenizer for every piece and score and writes each piece visibly; the page
built it three times on every rerun (0.6 s at opus-mt's 58,101 pieces, with the check whether source and
target share one vocabulary). The frames are shared by
every session (``st.cache_resource``, no copy): nobody may change them.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from transformer.pipeline import Pipeline
from ui.charts import tokens as charts
from ui.models.menu import is_decoder_only


@st.cache_resource(max_entries=8, show_spinner=False)
def _tables(model_key: str, _pipeline: Pipeline) -> tuple[bool, dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    source = _pipeline.src_tokenizer.vocab()
    shared = _pipeline.src_tokenizer is _pipeline.tgt_tokenizer
    target = source if shared else _pipeline.tgt_tokenizer.vocab()
    shared = shared or source.equals(target)
    raw = {"source": source, "target": source if shared else target}
    visible = {side: table.assign(piece=table["piece"].astype(str).map(charts.visible_piece))
               for side, table in raw.items()}
    if is_decoder_only(_pipeline):  # its pieces readable ("Ġworld" -> "␣world"), the stored piece beside them
        readable = _pipeline.tokenizer.display_pieces
        visible = {side: table.assign(piece=readable(table["id"].tolist()), **{"stored as": table["piece"]})
                   for side, table in raw.items()}
    return shared, raw, visible


def vocabulary(model_key: str, pipeline: Pipeline) -> tuple[bool, dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """(whether source and target share one vocabulary, the tables by side, the same with each piece written
    visibly: the space piece as "␣", not a blank row). A table has one row per id with its piece and score
    (``Tokenizer.vocab``); the visible one has the same index, so ``visible.loc[rows.index]`` shows rows."""
    return _tables(model_key, pipeline)
