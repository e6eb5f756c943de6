"""A from-scratch encoder-decoder Transformer that can show every intermediate."""

from .network.config import TransformerConfig

__all__ = ["Trace", "Transformer", "TransformerConfig", "load_pretrained"]


def __getattr__(name: str):
    # Imported lazily so that `import transformer` and its config stay light: torch alone takes about
    # 1.5 s to import, and the app draws its first chart from a config before it pays for it.
    if name == "Transformer":
        from .network.model import Transformer

        return Transformer
    if name == "Trace":
        from .network.trace import Trace

        return Trace
    if name == "load_pretrained":
        from .pipeline import load_pretrained

        return load_pretrained
    raise AttributeError(f"module 'transformer' has no attribute {name!r}")
