"""A from-scratch encoder-decoder Transformer that can show every intermediate."""

from .network.config import TransformerConfig
from .network.model import Transformer
from .network.trace import Trace

__all__ = ["Trace", "Transformer", "TransformerConfig", "load_pretrained"]


def __getattr__(name: str):
    # Imported lazily so that `import transformer` stays light (no tokenizer or safetensors).
    if name == "load_pretrained":
        from .pipeline import load_pretrained

        return load_pretrained
    raise AttributeError(f"module 'transformer' has no attribute {name!r}")
