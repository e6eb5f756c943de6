"""Training with the paper's recipe (section 5), and its command line (``python -m transformer.train``).

One job per module:

- ``config.py``: ``TrainConfig`` (every setting, one comment each), its checks, the data and network
  it names, and the records a run reports (``Progress``, ``TrainResult``, ``TrainingDiverged``).
- ``batching.py``: tokenized splits (``Examples``) and batches of similar length under a token budget.
- ``schedule.py``: the learning rate at each step (warmup then 1/sqrt(step), constant, cooldown).
- ``loss.py``: the label-smoothed loss and the scores evaluation reports.
- ``evaluation.py``: a model's loss, accuracy, exact match, BLEU and chrF on a split.
- ``runtime.py``: the machine: device, CPU threads, mixed precision, data-parallel processes.
- ``loop.py``: ``train``: set a run up, step it, snapshot, evaluate, save.
- ``cli.py``: the command line (``__main__.py`` runs it).
- ``compare.py``: the encoder-decoder against a decoder-only model (``architecture="decoder"``) on one config:
  steps and seconds to a target exact match.

Imports the network, text, decoding (greedy outputs for evaluation) and checkpoints; nothing
from explanation or the app.
"""

from .batching import Examples, encode_split
from .cli import main
from .config import Progress, TrainConfig, TrainingDiverged, TrainResult, check_config, make_splits, model_config
from .evaluation import evaluate
from .loop import is_snapshot_step, train
from .schedule import learning_rate

__all__ = ["Examples", "Progress", "TrainConfig", "TrainResult", "TrainingDiverged", "check_config",
           "encode_split", "evaluate", "is_snapshot_step", "learning_rate", "main", "make_splits", "model_config",
           "train"]
