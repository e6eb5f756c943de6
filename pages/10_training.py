"""Page 10: train a model here (task or own pairs, tokenizer, size, schedule), watch it learn, then watch
its attention form over the snapshots saved during training."""

import streamlit as st

from transformer.text import tasks as data
from ui.models import training, training_defaults, training_job
from ui.models.menu import not_trainable_note
from ui.models.training import DEFAULTS
from ui.sections.runs_page import kept_runs_section
from ui.sections.sidebar import sidebar
from ui.sections.training_progress import progress_section
from ui.sections.training_recipe import recipe_charts
from ui.sections.training_snapshots import snapshots_section
from ui.state.settings import uploads_allowed

app = sidebar(require_model=False, select_trained=True)

st.title("Training")
st.markdown(
    "Training shows the model source/target pairs and nudges every weight to make the reference's next "
    "token more likely (teacher forcing: the decoder reads the reference shifted right). The paper's recipe: "
    "Adam with $\\beta_1 = 0.9, \\beta_2 = 0.98, \\epsilon = 10^{-9}$; a learning rate that rises linearly "
    "for `warmup` steps and then decays with $1/\\sqrt{step}$; and **label smoothing**: the target puts "
    "$1 - \\epsilon_{ls}$ on the reference token and spreads $\\epsilon_{ls}$ over the whole vocabulary."
)
st.latex(r"lrate = d_{model}^{-0.5} \cdot \min(step^{-0.5},\; step \cdot warmup^{-1.5})")
st.latex(r"q(k) = (1 - \epsilon_{ls})\,[k = y] + \epsilon_{ls} / V")
not_trainable_note(app.model, app.pipeline)  # a Hugging Face model is not trained further here


# --- what to train on ----------------------------------------------------------------------------

st.header("1. Data, tokenizer, model")
data_col, tok_col, model_col = st.columns(3)
with data_col:
    own = ["My own pairs (TSV/CSV)"] if uploads_allowed() else []  # public mode: only when uploads are allowed
    source = st.radio("Data", ["Built-in task", *own], key="train_source")
    options: dict = {}
    src_lang, tgt_lang, task, data_path, example = "en", "de", "copy", None, None
    if source == "Built-in task":
        task = st.selectbox("Task", data.TASKS, index=data.TASKS.index("reverse"), key="train_task")
        st.caption(data.describe_task(task))
        if task in ("numbers", "dates"):
            langs = data.NUMBER_LANGS if task == "numbers" else data.DATE_LOCALES
            left, right = st.columns(2)
            src_lang = left.selectbox("From", langs, index=langs.index("en"), key="train_src_lang")
            tgt_lang = right.selectbox("To", langs, index=langs.index("de"), key="train_tgt_lang")
        if task in ("copy", "reverse", "sort"):
            options["max_len"] = st.slider("Longest string", 2, 24, 12, key="train_max_chars")
        if task == "numbers":
            options["max_number"] = st.select_slider("Largest number", [99, 999, 9999, 99_999, 999_999],
                                                     value=9999, key="train_max_number")
        if task == "sentences":  # one clause learns in a minute; subordinate clauses (verb last) take longer
            options["max_clauses"] = st.slider("Clauses per sentence, at most", 1, 3, 1, key="train_max_clauses")
        n_train = st.select_slider("Training pairs", [200, 1000, 2000, 5000, 10000, 20000], value=5000,
                                   key="train_n_train")
        try:
            example = training.task_example(task, src_lang, tgt_lang, options)
        except ValueError as error:
            st.error(str(error))
    else:
        n_train = 20000
        uploaded = st.file_uploader("Pairs: one per line, source<TAB>target (or CSV)", type=["tsv", "csv", "txt"],
                                    key="train_upload", max_upload_size=training.MAX_PAIRS_MB)
        if uploaded is not None:
            checked = training.read_upload(uploaded)
            if checked[0] == "error":
                st.error(f"Cannot use this file: {checked[1]}")
            else:
                _, data_path, n_pairs, example = checked
                st.success(f"{n_pairs:,} pairs, e.g. {example[0]!r} → {example[1]!r}")
    if example:
        st.caption(f"Example: {example[0]!r} → {example[1]!r}")
builtin = task if source == "Built-in task" else None
defaults = training_defaults.apply_task_defaults(st.session_state, builtin)

with tok_col:
    default_kind = "char" if task in ("copy", "reverse", "sort") and source == "Built-in task" else "bpe"
    kind = st.selectbox("Tokenizer", ["bpe", "unigram", "char"], index=["bpe", "unigram", "char"].index(default_kind),
                        key=f"train_tokenizer_{default_kind}")
    vocab_size = st.slider("Vocabulary size", 40, 1000, 160, 10, key="train_vocab", disabled=kind == "char",
                           help="SentencePiece's size, the 4 reserved tokens included; characters need none")
    separate = st.checkbox("Separate source and target vocabularies", key="train_separate")

with model_col:
    d_model = st.select_slider("d_model", [16, 32, 64, 128, 256], key="train_d_model")
    n_heads = st.select_slider("Heads h", [1, 2, 4, 8], value=DEFAULTS.n_heads, key="train_heads")
    n_layers = st.slider("Layers N (each stack)", 1, 4, DEFAULTS.n_layers, key="train_layers")
    d_ff = st.select_slider("d_ff", [32, 64, 128, 256, 512, 1024], key="train_d_ff")
    dropout = st.slider("Dropout", 0.0, 0.5, DEFAULTS.dropout, 0.05, key="train_dropout")
    if defaults["norm_first"]:
        st.caption("Pre-LN (layer norm before each sub-layer), as the shipped `reverse` model: at this size it "
                   "learns this task sooner than the paper's post-LN.")

st.header("2. Schedule and objective")
sched_col, smooth_col = st.columns(2)
with sched_col:
    left, right = st.columns(2)
    schedule = left.radio("Learning-rate schedule", ["noam", "constant"], key="train_schedule",
                          format_func={"noam": "warm-up, then 1/√step (paper)", "constant": "constant"}.get)
    warmup = right.number_input("Warm-up steps", 1, 20000, step=50, key="train_warmup")
    lr_factor = left.number_input("Factor (scales the curve)", 0.05, 10.0, DEFAULTS.lr_factor, 0.05,
                                  key="train_lr_factor")
    max_seconds = right.slider("Train for (seconds)", 3, 300, 60, key="train_seconds")
with smooth_col:
    smoothing = st.slider("Label smoothing ε_ls", 0.0, 0.5, DEFAULTS.label_smoothing, 0.05, key="train_smoothing")

config = training.make_config(
    task=task, src_lang=src_lang, tgt_lang=tgt_lang, data=data_path, task_options=options, n_train=n_train,
    tokenizer=kind, vocab_size=vocab_size, separate_vocab=separate, d_model=d_model, n_heads=n_heads,
    n_layers=n_layers, d_ff=d_ff, dropout=dropout, schedule=schedule, warmup=int(warmup), lr_factor=float(lr_factor),
    label_smoothing=smoothing, max_seconds=max_seconds, device=app.device, norm_first=defaults["norm_first"],
)
waiting = source != "Built-in task" and data_path is None  # no usable upload yet
problem = training.config_problem(config)

recipe_charts(config, example, sched_col, smooth_col)

# --- training, off the script thread --------------------------------------------------------------

st.header("3. Train")
job = training_job.session_job()
if waiting:
    st.info("Upload a file of pairs first (section 1).")
elif problem:
    st.error(problem)
blocked = waiting or bool(problem) or bool(job and job.running)
start = st.button("Train", type="primary", key="train_start", disabled=blocked)
if start and not blocked:
    try:
        job = training.start_run(config)
    except ValueError as error:  # public mode: no room on the server for another run now
        st.error(str(error))

progress_section(builtin)
kept_runs_section()

# --- attention over the snapshots -----------------------------------------------------------------

st.header("4. How the attention formed")
st.markdown(
    "Training saves the weights at steps 0, 1, 2, 5, 10, 20, 50, 100, ... Each snapshot runs the current "
    "input (teacher-forced on the final model's output, so every snapshot reads the same tokens). At step 0 "
    "the cross-attention is nearly uniform; as the model learns, each output token looks at the source "
    "tokens it needs: for `reverse` the anti-diagonal appears."
)

snapshots_section(app)
