"""A private view of a shared model, for the explanation methods that hook into a forward pass.

Integrated gradients and saliency replace the embedding layer's output with a hook, activation
patching replaces layer outputs, the residual-stream measure reads them: each hook lives only for
one call and is removed again. But one model object serves every session of the app's server at
once, and a hook on it would also act on another session's forward in that window (a translation
computed with someone else's embeddings). So these methods hook a *view*: a copy of the module
tree that shares every parameter and buffer with the model (no weights are copied, tied weights
stay tied), whose hooks no other caller can see.
"""

from __future__ import annotations

import copy
from typing import TypeVar

import torch
from torch import nn

ModuleT = TypeVar("ModuleT", bound=nn.Module)


def private_view(model: ModuleT) -> ModuleT:
    """The same network as ``model`` (same parameter and buffer tensors) in module objects of its own."""
    shared: dict[int, object] = {id(t): t for t in (*model.parameters(), *model.buffers())}
    for module in model.modules():  # generators cannot be deep-copied; a view draws from the same one
        for value in vars(module).values():
            if isinstance(value, torch.Generator):
                shared[id(value)] = value
    return copy.deepcopy(model, shared)
