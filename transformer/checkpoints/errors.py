"""The package's one error for a model folder that cannot be read (ours or a Hugging Face one, any family), in a
module of its own so that every reader of folders can raise it without importing the others (checkpoint.py,
train_log.py, weights_files.py and the hub's family readers do; it imports nothing, so the torch-free family files
can raise it too)."""


class CheckpointError(ValueError):
    """A checkpoint folder is missing, damaged, or does not fit its own config."""
