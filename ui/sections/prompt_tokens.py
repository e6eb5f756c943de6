"""The Tokenization page for a decoder-only model: the prompt as the model reads it and the continuation it wrote.

A decoder-only model has no source and target sides: one tokenizer reads the prompt (with the family's BOS first
where its tokenizer adds one: Llama, Mistral, Gemma; GPT-2 and Qwen add none) and writes the continuation. Its
pieces are byte-level BPE (GPT-2, Qwen, Llama-3: "Ġworld") or SentencePiece with byte fallback (Llama-2, Mistral,
Gemma: "▁world", "<0xE2>"), written readably (``LMTokenizer.display_pieces``: ␣ a space, ↵ a line break, <0xNN> a
byte that is no character on its own). With the sidebar's Chat switch on, the prompt is the chat template's text
around the user's message, shown as rendered before its tokens.
"""

from __future__ import annotations

import streamlit as st

from ui.charts import tokens as charts
from ui.compute.analysis import Analysis
from ui.models.menu import is_huggingface
from ui.sections.app_context import AppContext
from ui.state.widgets import csv_button, guard


def intro(app: AppContext) -> None:
    """The page's opening for a decoder-only model: what its tokenizer does, its special tokens."""
    tokenizer = app.pipeline.tokenizer
    if not is_huggingface(app.pipeline):  # one of ours, trained here on a task: one joint vocabulary of ours
        st.markdown(
            "The model never sees text, only integers. This decoder-only model was trained here on "
            "`source <s> target </s>` sequences, so one tokenizer (a "
            f"{tokenizer.kind} tokenizer of {tokenizer.vocab_size:,} pieces, trained on sources and targets "
            "together) cuts both into pieces; the reserved ids (in this model: "
            f"{charts.special_ids_text(app.pipeline.config, tokenizer)}) are the encoder-decoder's, and `<s>` "
            "separates the source from the answer:")
        st.latex(r"x_1 \dots x_m \;\texttt{<s>}\; y_1 \dots y_n \;\texttt{</s>}")
        return
    ids = {"bos_token": tokenizer.bos_id, "eos_token": tokenizer.eos_id, "pad_token": tokenizer.pad_id,
           "unk_token": tokenizer.unk_id}
    st.markdown(
        "The model never sees text, only integers. Its tokenizer cuts the text into *pieces* from a fixed "
        f"vocabulary of {tokenizer.vocab_size:,} and replaces each piece by its id; a few ids are special (in this "
        f"model: {charts.lm_special_text(tokenizer.special_tokens, ids, len(tokenizer.special_ids))}). Its pieces "
        "were learnt by byte-pair encoding (BPE): start from single bytes (or characters) and repeatedly merge the "
        "most frequent adjacent pair into a new piece, until the vocabulary has the wanted size:")
    st.latex(r"(a, b)^{*} = \arg\max_{(a, b)} \operatorname{count}(a\,b), \qquad "
             r"\text{text} \;\to\; (t_1, \dots, t_n),\; t_i \in \{0, \dots, V - 1\}")


def bos_note(app: AppContext, first_id: int | None) -> str:
    """Whether the prompt starts with the family's BOS, in words ("" for an empty prompt); for a model of ours,
    where its separator stands."""
    tokenizer = app.pipeline.tokenizer
    if first_id is None:
        return ""
    if not is_huggingface(app.pipeline):
        return (f"The last token, `{tokenizer.id_to_piece(tokenizer.bos_id)}` (id {tokenizer.bos_id}), is the "
                "separator the model was trained with: what follows it is the answer.")
    bos = tokenizer.bos_id
    if bos is not None and first_id == bos:
        who = "the chat template writes it" if app.chat else "this family's tokenizer puts it before every text"
        return (f"The first token, `{tokenizer.id_to_piece(bos)}` (id {bos}), is the BOS (beginning of sequence): "
                f"{who}, as the model was trained.")
    return "This family's tokenizer adds no BOS: the first token is the text's own."


def show_prompt(app: AppContext, analysis: Analysis) -> None:
    """The prompt (rendered through the chat template where Chat is on) and its tokens, the continuation's tokens,
    and both as a table with the pieces as stored."""
    tokenizer, result = app.pipeline.tokenizer, analysis.result
    special = tokenizer.special_ids
    st.subheader("The prompt: what the model reads")
    if app.chat:
        st.markdown("**Chat** is on (sidebar): the prompt is the model's chat template filled with your text as a "
                    "user's message, ending where the assistant's answer begins:")
        with guard("Rendering the chat template"):
            st.code(tokenizer.render_chat([{"role": "user", "content": analysis.text}]), language=None,
                    wrap_lines=True)
    st.markdown(charts.chips_html(result.src_pieces, result.src_ids, special), unsafe_allow_html=True)
    st.caption(f"{charts.plural(len(result.src_ids), 'token')} from "
               f"{charts.plural(len(analysis.text), 'character')} of text. "
               + bos_note(app, result.src_ids[0] if result.src_ids else None))
    if is_huggingface(app.pipeline):  # ours are stored as they read
        st.caption(charts.READABLE_MARKS)

    st.subheader("The continuation: what the model wrote")
    if result.output_ids:
        st.markdown(charts.chips_html(result.output_pieces, result.output_ids, special), unsafe_allow_html=True)
    eos = "its end of text" if result.finished else "no end of text within the length limit"
    st.caption(f"Greedy continuation, {charts.plural(len(result.output_ids), 'token')} and {eos}: "
               f"{result.output_text!r}.")

    with st.expander("Tokens as a table"):
        ids = [*result.src_ids, *result.output_ids]
        table = charts.stored_tokens_frame([*result.src_pieces, *result.output_pieces],
                                           [tokenizer.id_to_piece(int(i)) for i in ids], ids, special)
        table.insert(1, "part", ["prompt"] * len(result.src_ids) + ["continuation"] * len(result.output_ids))
        st.dataframe(table, hide_index=True)
        csv_button(table, "tokens.csv")
