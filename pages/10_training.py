"""Page 10: train a model here (task or own pairs, tokenizer, size, schedule), watch it learn, then watch
its attention form over the snapshots saved during training."""

import numpy as np
import streamlit as st

from transformer.checkpoint import CheckpointError, read_log
from transformer.text import tasks as data
from transformer.train.scores import LABELS, task_scores
from ui import training, training_defaults, training_job
from ui.analysis import analyse, builtin_task, examples_for
from ui.charts import training as charts
from ui.figure_cache import chart
from ui.models import load_pipeline, not_trainable_note
from ui.presentation import show_chart
from ui.runs_page import kept_runs_section
from ui.settings import LAST_TRAINED
from ui.sidebar import sidebar
from ui.training import DEFAULTS, SPECIALS
from ui.widgets import csv_button

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
    source = st.radio("Data", ["Built-in task", "My own pairs (TSV/CSV)"], key="train_source")
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
                                    key="train_upload")
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

with sched_col:
    horizon = max(4 * config.warmup, 1000)
    schedule_frame = charts.lr_schedule_frame(config.d_model, config.warmup, horizon,
                                              lr_fn=training.learning_rate_fn(config))
    show_chart(chart(charts.lr_schedule_chart, schedule_frame,
                     warmup_steps=config.warmup if schedule == "noam" else None,
                     title=f"Learning rate (d_model = {d_model}, warm-up = {warmup})"),
                    key="train_lr_chart")
    csv_button(schedule_frame.set_index("step"), "learning_rate.csv", key="train_lr_csv")
with smooth_col:
    target = (example[1] if example else "hello") or "hello"
    pieces = list(dict.fromkeys(target.replace(" ", "")))[:12] or ["a"]
    smoothed = charts.label_smoothing_frame(SPECIALS + pieces, len(SPECIALS), smoothing)
    show_chart(chart(charts.label_smoothing_chart, smoothed, epsilon=smoothing), key="train_smoothing_chart")
    st.caption(f"A small vocabulary of V = {len(smoothed)} (the specials and the characters of an example target), "
               f"the reference {pieces[0]!r}: it gets {1 - smoothing + smoothing / len(smoothed):.3f}, every other "
               f"token {smoothing / len(smoothed):.4f}.")
    csv_button(smoothed.set_index("token"), "label_smoothing.csv", key="train_smoothing_csv")

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
    job = training.start_run(config)


def progress_panel() -> None:
    """Progress bar, live curves and the stop button; reruns itself every second while training."""
    job = training_job.session_job()
    if job is None:
        promise = training_defaults.promise(builtin)
        st.info("Choose the settings above and press **Train**."
                + (f" With this page's defaults, {promise}." if promise else ""))
        return
    records = job.records()
    latest = job.latest()
    cfg = job.config
    fit = task_scores(None if cfg.data else cfg.task, cfg.tokenizer)  # the scores that measure this task
    step = getattr(latest, "step", 0) if latest is not None else 0
    fraction = min(1.0, job.elapsed / cfg.max_seconds) if cfg.max_seconds else 0.0
    if job.done:
        fraction = 1.0
    status = {"running": f"Training: step {step}, {job.elapsed:.0f} s of {cfg.max_seconds:.0f} s",
              "stopped": f"Stopped at step {step} after {job.elapsed:.0f} s (of the {cfg.max_seconds:.0f} s allowed)",
              "finished": f"Finished: step {step}, {job.elapsed:.0f} s in all with the test sentences",
              "failed": f"Failed at step {step}"}.get(job.status, "")
    st.progress(fraction, text=status)
    if job.running:
        st.button("Stop", key="train_stop", on_click=job.stop)
    frame = charts.progress_frame(records)
    if len(frame):
        show_chart(chart(charts.training_curves_chart, frame, fit.names), key="train_curves")
        csv_button(frame.set_index("step") if "step" in frame else frame, "training_log.csv",
                         key="train_log_csv")
    if job.status == "failed":
        st.error(f"Training failed: {job.error}")
        with st.expander("Details"):
            st.code(job.error_details or "")
    elif job.done:
        result = job.result
        metrics = result.metrics or {}
        split = "test" if metrics.get("test") else "validation"
        test = metrics.get("test") or metrics.get("valid") or {}
        if test:
            st.caption(f"Greedy decoding on the {split} sentences"
                       + (" (the run was stopped before the test)" if split == "validation" else "") + ":")
            cols = st.columns(len(fit.names))
            for col, key in zip(cols, fit.names, strict=True):
                value = test.get(key)
                if value is not None:
                    col.metric(LABELS[key], f"{100 * value:.1f}%" if key in ("exact_match", "token_accuracy")
                               else f"{value:.1f}")
            st.caption(fit.why)
            note = training_defaults.bleu_note(test, training_defaults.single_word_targets(
                None if cfg.data else cfg.task, cfg.task_options, cfg.src_lang, cfg.tgt_lang))
            if note and "bleu" in fit.names:
                st.caption(note)
        if not job.registered:  # it ended after this run's sidebar: rerun the app, whose sidebar registers it
            st.rerun(scope="app")
        if job.registration_error:
            st.error(f"The run finished but its checkpoint cannot be used: {job.registration_error}")
        elif job.registered_label:
            st.success(f"The model is now selectable as “{job.registered_label}” in the sidebar ({result.step} "
                       f"steps, {result.elapsed:.0f} s, {result.stop_reason}).")
    elif job.running and fraction >= 1.0:
        st.caption("Evaluating on the validation and test sentences...")


job = training_job.session_job()
st.fragment(progress_panel, run_every=1.0 if job is not None and job.running else None)()
kept_runs_section()

# --- attention over the snapshots -----------------------------------------------------------------

st.header("4. How the attention formed")
st.markdown(
    "Training saves the weights at steps 0, 1, 2, 5, 10, 20, 50, 100, ... Each snapshot runs the current "
    "input (teacher-forced on the final model's output, so every snapshot reads the same tokens). At step 0 "
    "the cross-attention is nearly uniform; as the model learns, each output token looks at the source "
    "tokens it needs: for `reverse` the anti-diagonal appears."
)


with_snapshots = training.models_with_snapshots()
if not with_snapshots:
    st.info("No model with snapshots yet: train one above (snapshots are on by default).")
    st.stop()
labels = [entry.label for entry, _ in with_snapshots]
preferred = st.session_state.get(LAST_TRAINED)
choice = st.selectbox("Model", labels, index=labels.index(preferred) if preferred in labels else 0,
                      key="train_snapshot_model")
entry, steps = with_snapshots[labels.index(choice)]
text = app.text if app.model is not None and app.model.label == entry.label else None
try:
    final = load_pipeline(entry, "cpu")
    examples = examples_for(final)
    text = st.text_input("Input sentence", value=text or (examples[0][0] if examples else app.text),
                         key=f"train_snapshot_text_{entry.key}")
    run = training.snapshot_input(final, analyse(entry.key, "cpu", final, text).result)
except (ValueError, CheckpointError, OSError, TypeError) as error:
    st.error(f"Cannot run this input on {entry.label}: {error}")
    st.stop()
src_ids, tgt_ids, src_tokens, tgt_tokens = run.src_ids, run.tgt_ids, run.src_tokens, run.tgt_tokens
st.caption(f"Final output: {run.output_text!r}")

step_col, layer_col, head_col = st.columns([3, 1, 1])
step = step_col.select_slider("Snapshot (training step)", steps, value=steps[-1], key=f"train_snapshot_{entry.key}")
layer = layer_col.selectbox("Layer", range(final.config.n_decoder_layers), key="train_snapshot_layer")
head = head_col.selectbox("Head", [-1, *range(final.config.n_heads)], key="train_snapshot_head",
                          format_func=lambda h: "mean of heads" if h < 0 else f"head {h}")
head = None if head < 0 else head
try:
    weights = training.snapshot_cross_attention(str(entry.folder), entry.key, step, src_ids, tgt_ids)
except (CheckpointError, ValueError, OSError, RuntimeError) as error:
    st.error(f"Cannot load the snapshot at step {step}: {error}")
    st.stop()
matrix = weights[layer].mean(axis=0) if head is None else weights[layer, head]
what = "mean of heads" if head is None else f"head {head}"
heat_col, sharp_col = st.columns([3, 2])
with heat_col:
    show_chart(chart(charts.attention_heatmap, matrix, src_tokens, tgt_tokens,
                     title=f"Cross-attention at step {step}: layer {layer}, {what}"),
               key="train_snapshot_heatmap")
    csv_button(charts.attention_frame(matrix, src_tokens, tgt_tokens),
                     f"cross_attention_step{step}_L{layer}.csv", key="train_snapshot_csv")
with sharp_col:
    if st.checkbox("Sharpness over all snapshots", value=len(steps) <= 25, key="train_sharpness"):
        entropies = []
        for s in steps:
            w = training.snapshot_cross_attention(str(entry.folder), entry.key, s, src_ids, tgt_ids)[layer]
            entropies.append(charts.attention_entropy(w.mean(axis=0) if head is None else w[head]))
        show_chart(chart(charts.attention_entropy_chart, steps, entropies, current=step), key="train_entropy")
        st.caption(f"Uniform attention over {len(src_ids)} source tokens has entropy {np.log(len(src_ids)):.2f}; "
                   "a head that reads exactly one token has 0.")

try:
    log = read_log(entry.folder)
except CheckpointError as error:
    st.warning(f"The training log cannot be read: {error}")
    log = []
if log:
    with st.expander(f"Training curves of {entry.label} (from its log)"):
        fit = task_scores(builtin_task(final), final.tgt_tokenizer.kind)
        show_chart(chart(charts.training_curves_chart, charts.progress_frame(log), fit.names),
                   key="train_saved_curves")
        st.caption(fit.why)
