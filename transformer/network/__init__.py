"""The network itself: the encoder-decoder of "Attention Is All You Need" and what one call records.

Holds the config, masks, the positional encoding, attention, the layers, the model, the ``Trace``
and the mapping to ``torch.nn.Transformer`` (``interop``). Imports only torch: nothing from text,
training, decoding or explanation, so the network can be read next to the paper on its own.
"""
