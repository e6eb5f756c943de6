"""The package's error for model folders, in a module of its own so that every reader of folders can raise it
without importing the others (checkpoint.py and train_log.py both do)."""


class CheckpointError(ValueError):
    """A checkpoint folder is missing, damaged, or does not fit its own config."""
