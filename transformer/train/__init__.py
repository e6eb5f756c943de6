"""Training with the paper's recipe, and its command line (``python -m transformer.train``).

Imports the network, text, decoding (greedy outputs for evaluation) and checkpoints; nothing
from explanation or the app.
"""

from .loop import (
    Examples,
    Progress,
    TrainConfig,
    TrainingDiverged,
    TrainResult,
    check_config,
    encode_split,
    evaluate,
    is_snapshot_step,
    learning_rate,
    main,
    make_splits,
    model_config,
    train,
)

__all__ = ["Examples", "Progress", "TrainConfig", "TrainResult", "TrainingDiverged", "check_config",
           "encode_split", "evaluate", "is_snapshot_step", "learning_rate", "main", "make_splits", "model_config",
           "train"]
