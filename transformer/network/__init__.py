"""The network itself: the encoder-decoder of "Attention Is All You Need" and what one call records.

Holds the config, masks, the positional encoding, attention, the layers, the model, its sites (``sites``:
each value under one name, read by the ``Trace`` and edited by ``intervene``) and the mapping to
``torch.nn.Transformer`` (``interop``). Imports only torch: nothing from text, training, decoding or
explanation, and no speed trick or session plumbing (a decoding step's generator layout lives in
decoding/fast.py, a training run's dropout generator in train/dropout.py), so the network can be read next
to the paper on its own.
"""
