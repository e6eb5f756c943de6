"""Model folders on disk: our checkpoints (``checkpoint``: writing and reading them; ``snapshots``: the training
snapshots; ``train_log``), and what every reader of a folder shares: ``file_caps`` (every small file read under its
cap, JSON parsed safely), ``weights_header`` (a safetensors header read and checked against the config before
anything is built), ``weights_files`` (any Hugging Face family's weight files) and ``errors`` (``CheckpointError``,
the one error for a folder that cannot be read)."""
