"""Explanation: why a token came out, and what each layer adds.

- ``attribute`` (attribution.py): one call for every attribution method in ``METHODS``
  (attention, rollout, relevancy, norm, saliency, input × gradient, integrated gradients,
  occlusion), an ``Attribution`` of source (and target-prefix) scores per output token;
- ``attention_rollout`` (rollout.py), ``logit_lens`` (logit_lens.py), ``residual_stream``
  (residual.py);
- ``head_summary`` (heads.py, patterns in head_patterns.py): one row per attention head, what
  it looks at, its ablation importance and role; ``pruning_curve`` (pruning.py) switches heads
  off least important first; ``activation_patching`` (patching.py) copies clean activations into
  a corrupted run;
- ``agreement`` and ``alignment_accuracy`` (agreement.py) compare methods with each other
  and with ``true_alignment`` (alignment.py) on the built-in tasks.

It may import the network and text; the network never imports it. It uses the network only
through its public forward: traces (``Trace(keep_graph=True)`` where gradients of
intermediates are needed), ``ablate=``, and forward hooks on a private view of the model
(``views.private_view``: its own module objects, the same weights) that it removes again before
returning. It never changes a model (parameters, buffers, train/eval mode, hooks) and never
touches process-wide state (no torch.manual_seed, no global grad-mode switch: only the
thread-local ``torch.enable_grad()`` / ``torch.no_grad()`` context managers).
"""

from .agreement import agreement, alignment_accuracy
from .alignment import dependency_arcs, true_alignment
from .attribution import METHODS, Attribution, attribute
from .heads import ALIGNMENT_THRESHOLD, NOOP_THRESHOLD, POSITIONAL_THRESHOLD, ROLES, SYNTACTIC_THRESHOLD, head_summary
from .logit_lens import logit_lens
from .patching import activation_patching
from .pruning import pruning_curve
from .residual import residual_stream
from .rollout import attention_rollout

__all__ = ["METHODS", "Attribution", "agreement", "alignment_accuracy", "attention_rollout", "attribute",
           "dependency_arcs",
           "logit_lens", "residual_stream", "true_alignment"]
__all__ += ["ALIGNMENT_THRESHOLD", "NOOP_THRESHOLD", "POSITIONAL_THRESHOLD", "ROLES", "SYNTACTIC_THRESHOLD",
            "activation_patching", "head_summary", "pruning_curve"]
