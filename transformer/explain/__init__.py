"""Explanation: why a token came out, and what each layer adds.

- ``attribute`` (attribution.py): one call for every attribution method in ``REGISTRY``, an
  ``Attribution`` of source (and target-prefix) scores per output token; the registry's entries
  give each method's function, cost class and texts (``methods_table``, ``methods_markdown``);
- ``attention_rollout`` (rollout.py), ``logit_lens`` and ``logit_lens_top`` (logit_lens.py), ``residual_stream``
  (residual.py), which take ``tgt_ids`` = ``<s> y </s>`` as ``attribute`` does;
- ``head_summary`` (heads.py, patterns in head_patterns.py): one row per attention head, what
  it looks at, its importance (ablation and Michel et al.'s gradient) and role; ``pruning_curve``
  (pruning.py) switches heads off least important first; ``activation_patching`` (patching.py)
  copies clean activations into a corrupted run (``lm_activation_patching``: a decoder-only model's prompts);
- ``lm_head_summary`` (lm_heads.py, scores in lm_head_patterns.py): one row per head of a decoder-only model,
  its previous-token, duplicate-token, induction (prefix matching), copying and attention-sink scores on
  repeated random tokens, beside chance and a bootstrap interval, and its role;
- a decoder-only language model takes all of these with the prompt as the source and a placeholder then the
  continuation as the target (``lm_pair``, pairs.py);
- ``faithfulness`` and ``faithfulness_summary`` (eraser.py): ERASER's comprehensiveness and sufficiency of
  an ``Attribution``, hard and soft, beside a random ranking;
- ``agreement`` and ``alignment_accuracy`` (agreement.py) compare methods with each other
  and with ``true_alignment`` (alignment.py) on the built-in tasks.

It may import the network and text; the network never imports it. It uses the network only
through its public forward: it reads traces (``Trace(keep_graph=True)`` where gradients of
intermediates are needed, ``Trace(sublayers=True)`` for the residual stream) and writes through
the network's intervention sites (``with intervene({...}):``, network/interventions.py), which
live in the calling thread's context; it hooks no module. It never changes a model (parameters,
buffers, train/eval mode, hooks) and never
touches process-wide state (no torch.manual_seed, no global grad-mode switch: only the
thread-local ``torch.enable_grad()`` / ``torch.no_grad()`` context managers).
"""

import importlib
from typing import Any

# name -> the module that defines it. Imported on first use (PEP 562): the gradient methods import Captum,
# seconds (docs/benchmarks.md, "importing Captum"), which the head statistics, patching and the Attention page
# never need.
_EXPORTS = {
    "agreement": "agreement", "alignment_accuracy": "agreement",
    "dependency_arcs": "alignment", "true_alignment": "alignment",
    "METHODS": "attribution", "REGISTRY": "attribution", "Attribution": "attribution", "attribute": "attribution",
    "methods_markdown": "attribution", "methods_table": "attribution", "LAYER_VIEW_METHODS": "attribution",
    "own_options": "attribution",
    "ALIGNMENT_THRESHOLD": "heads", "NOOP_THRESHOLD": "heads", "POSITIONAL_THRESHOLD": "heads", "ROLES": "heads",
    "SYNTACTIC_THRESHOLD": "heads", "AGREEMENT_THRESHOLD": "heads", "BASELINE_MARGIN": "heads", "head_summary": "heads",
    "beats_position": "heads", "layer_normalised": "heads",
    "logit_lens": "logit_lens", "logit_lens_top": "logit_lens",
    "activation_patching": "patching", "lm_activation_patching": "patching", "pruning_curve": "pruning",
    "lm_head_summary": "lm_heads", "lm_head_roles": "lm_heads", "repeated_tokens": "lm_heads",
    "LM_ROLES": "lm_heads", "LM_THRESHOLDS": "lm_heads",
    "residual_stream": "residual", "attention_rollout": "rollout", "source_share": "alti",
    "randomization_check": "sanity", "RANDOM_LIKE_THRESHOLD": "sanity",
    "faithfulness": "eraser", "faithfulness_summary": "eraser",
    "word_ids": "word_alignment", "word_alignment": "word_alignment", "alignment_error_rate": "word_alignment",
    "read_pharaoh": "word_alignment", "gold_links": "word_alignment", "undefined_words": "word_alignment",
    "UNDEFINED_REASONS": "attribution", "lm_pair": "pairs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name = _EXPORTS[name]
    module = importlib.import_module(f".{module_name}", __name__)
    # Every name of that module becomes a plain attribute, so that the next lookup finds it directly. All at once:
    # importing a submodule sets the package attribute of its own name (``agreement``) to the submodule, which
    # would otherwise hide the function of that name from a later ``from transformer.explain import agreement``.
    for exported, owner in _EXPORTS.items():
        if owner == module_name:
            globals()[exported] = getattr(module, exported)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
