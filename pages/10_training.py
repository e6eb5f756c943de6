"""Page 10: train a model here (task or own pairs, tokenizer, size, schedule; encoder-decoder or decoder-only, or
both one after the other), watch it learn, watch its attention form over the snapshots saved during training,
and see a decoder-only run beside its encoder-decoder twin."""

import streamlit as st

from ui.models import training, training_defaults, training_job
from ui.models.menu import not_trainable_note
from ui.models.training import DEFAULTS
from ui.sections.runs_page import kept_runs_section
from ui.sections.sidebar import sidebar
from ui.sections.training_compare import architectures_section
from ui.sections.training_data import BOTH_HELP, architecture_switch, data_choices
from ui.sections.training_progress import progress_section
from ui.sections.training_recipe import recipe_charts
from ui.sections.training_snapshots import snapshots_section

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
    chosen = data_choices()
builtin = chosen.builtin
defaults = training_defaults.apply_task_defaults(st.session_state, builtin)

with model_col:
    architecture = architecture_switch()  # first in its column: the vocabulary's checkbox depends on it
with tok_col:
    default_kind = "char" if builtin in ("copy", "reverse", "sort") else "bpe"
    kind = st.selectbox("Tokenizer", ["bpe", "unigram", "char"], index=["bpe", "unigram", "char"].index(default_kind),
                        key=f"train_tokenizer_{default_kind}")
    vocab_size = st.slider("Vocabulary size", 40, 1000, 160, 10, key="train_vocab", disabled=kind == "char",
                           help="SentencePiece's size, the 4 reserved tokens included; characters need none")
    separate = st.checkbox("Separate source and target vocabularies", key="train_separate",
                           disabled=architecture == "decoder") and architecture != "decoder"

with model_col:
    d_model = st.select_slider("d_model", [16, 32, 64, 128, 256], key="train_d_model")
    n_heads = st.select_slider("Heads h", [1, 2, 4, 8], value=DEFAULTS.n_heads, key="train_heads")
    n_layers = st.slider("Layers N (each stack; decoder-only: 2N)", 1, 4, DEFAULTS.n_layers, key="train_layers")
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

recipe = training.make_config(  # the encoder-decoder's; "Train both" trains it and then its decoder-only twin
    task=chosen.task, src_lang=chosen.src_lang, tgt_lang=chosen.tgt_lang,
    data=chosen.data_path, task_options=chosen.options, n_train=chosen.n_train,
    tokenizer=kind, vocab_size=vocab_size, separate_vocab=separate, d_model=d_model, n_heads=n_heads,
    n_layers=n_layers, d_ff=d_ff, dropout=dropout, schedule=schedule, warmup=int(warmup), lr_factor=float(lr_factor),
    label_smoothing=smoothing, max_seconds=max_seconds, device=app.device, norm_first=defaults["norm_first"],
)
config = training.for_architecture(recipe, architecture)
waiting = chosen.waiting  # own pairs, no usable upload yet
problem = training.config_problem(config)

recipe_charts(config, chosen.example, sched_col, smooth_col)

# --- training, off the script thread --------------------------------------------------------------

st.header("3. Train")
job = training_job.session_job()
if waiting:
    st.info("Upload a file of pairs first (section 1).")
elif problem:
    st.error(problem)
blocked = waiting or bool(problem) or bool(job and job.running)
train_col, both_col = st.columns([1, 4])
start = train_col.button("Train", type="primary", key="train_start", disabled=blocked)
both = both_col.button("Train both", key="train_both", disabled=blocked, help=BOTH_HELP)
if (start or both) and not blocked:
    try:  # "Train both": the encoder-decoder, then its decoder-only twin (section 5 compares them)
        job = training.start_run(recipe, with_twin=True) if both else training.start_run(config)
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

architectures_section(app)
