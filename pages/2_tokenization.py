"""Page 2: the input split into pieces and ids, the vocabulary, and how another tokenizer would split it."""

import streamlit as st

from transformer.text.tokenizers import KINDS
from ui.charts import tokens as charts
from ui.compute.analysis import analyse, retrained_tokenizer
from ui.compute.vocabulary import vocabulary
from ui.models.menu import is_huggingface
from ui.sections import prompt_tokens
from ui.sections.input_analysis import require_analysis
from ui.sections.sidebar import sidebar
from ui.state.widgets import csv_button, guard

app = sidebar()
pipe = app.pipeline

st.title("Tokenization")
if app.decoder_only:  # one tokenizer, a prompt and its continuation (ui/sections/prompt_tokens.py)
    prompt_tokens.intro(app)
    prompt_tokens.show_prompt(app, require_analysis(app))
else:
    st.markdown(
        "The model never sees text, only integers. A tokenizer cuts the text into *pieces* from a fixed "
        "vocabulary and replaces each piece by its id; a few ids are reserved for special tokens (in this model: "
        f"{charts.special_ids_text(pipe.config, pipe.tgt_tokenizer)}). "
        "The paper used byte-pair encoding (BPE): start from characters and repeatedly merge the most "
        "frequent adjacent pair into a new piece, until the vocabulary has the wanted size:"
    )
    st.latex(r"(a, b)^{*} = \arg\max_{(a, b)} \operatorname{count}(a\,b), \qquad "
             r"\text{text} \;\to\; (t_1, \dots, t_n),\; t_i \in \{0, \dots, V - 1\}")

    analysis = require_analysis(app)
    result = analysis.result

    st.subheader("Source: what the encoder reads")
    st.markdown(charts.chips_html(result.src_pieces, result.src_ids), unsafe_allow_html=True)
    st.caption(f"{charts.plural(len(result.src_ids), 'token')} (with </s>) from "
               f"{charts.plural(len(result.src_text), 'character')} "
               f"({pipe.src_tokenizer.kind} tokenizer, {pipe.src_tokenizer.vocab_size} pieces).")

    st.subheader("Target: what the decoder wrote")
    st.markdown(charts.chips_html(analysis.decoder_tokens, analysis.decoder_ids), unsafe_allow_html=True)
    st.caption(f"The decoder input starts with {analysis.decoder_tokens[0]}; the output text is "
               f"{analysis.output_text!r}"
               + ("" if result.finished else " (stopped at the length limit, without </s>)") + ".")

    with st.expander("Tokens as a table"):
        source_table = charts.tokens_frame(result.src_pieces, result.src_ids)
        st.dataframe(source_table, hide_index=True)
        csv_button(source_table, "source_tokens.csv")

st.subheader("The vocabulary")
shared, tables, visible = vocabulary(app.model_key, pipe)  # built once per model: 58,101 pieces at opus-mt size
side = "source and target (shared)" if shared else st.radio("Side", ["source", "target"], horizontal=True,
                                                             key="tok_side")
tokenizer, table = (pipe.tgt_tokenizer, "target") if side == "target" else (pipe.src_tokenizer, "source")
query = st.text_input("Search pieces (or an id)", key="tok_search")
vocab = charts.search_vocab(tables[table], query)
st.dataframe(visible[table] if len(vocab) == len(tables[table]) else visible[table].loc[vocab.index],
             hide_index=True, height=280)
st.caption(f"{len(vocab)} of {tokenizer.vocab_size} pieces. Score: SentencePiece's score of the piece "
           "(a log-probability for unigram, the merge order for BPE) or a character's count in training.")
csv_button(vocab, "vocabulary.csv")


@st.fragment
def retrain() -> None:
    """Another tokenizer on the same task's text; a fragment, so the rest of the page is not rerun."""
    st.subheader("Another tokenizer, the same sentence")
    task = pipe.meta.get("task")
    from transformer.text.tasks import TASKS

    if task not in TASKS:
        where = (f"comes from Hugging Face with its own {'tokenizer' if app.decoder_only else 'SentencePiece models'}"
                 if is_huggingface(pipe)
                 else "was trained on its own data, which the app does not have")
        st.info(f"This model {where}: retraining a tokenizer needs one of the built-in tasks.")
        return
    result = analyse(app.model_key, app.device, pipe, app.text, chat=app.chat).result  # cached: shown above
    st.markdown(f"A shared tokenizer trained on 2,000 pairs of the **{task}** task (cached after the first time).")
    kind_col, size_col = st.columns(2)
    kind = kind_col.selectbox("Kind", KINDS, key="tok_kind")
    vocab_size = size_col.slider("Vocabulary size", 30, 2000, 200, step=10, key="tok_vocab_size",
                                 disabled=kind == "char", help="ignored by the character tokenizer")
    options = tuple(sorted((pipe.meta.get("task_options") or {}).items()))
    with guard("Training the tokenizer"):
        other = retrained_tokenizer(task, options, str(pipe.meta.get("src_lang", "en")),
                                          str(pipe.meta.get("tgt_lang", "de")), kind, vocab_size)
        pieces, ids = other.pieces(result.src_text), other.encode(result.src_text)
        st.markdown(charts.chips_html(pieces, ids), unsafe_allow_html=True)
        eos = result.src_pieces[-1:]  # both counted with the </s> the encoder reads after the text (or <s>)
        comparison = charts.split_comparison({
            f"this model's ({pipe.src_tokenizer.kind}, {pipe.src_tokenizer.vocab_size})": result.src_pieces,
            f"retrained ({kind}, {other.vocab_size})": [*pieces, *eos],
        })
        st.dataframe(comparison, hide_index=True)
        st.caption("A larger vocabulary gives fewer, longer pieces (shorter sequences, more embeddings to "
                   "learn); characters give the longest sequences and never an unknown piece of the corpus.")


retrain()
