"""Explanation: why a token came out and what each head does (attribution, rollout, logit lens, ...).

Empty for now. It may import the network (only through its public forward: traces, ``ablate=``),
text and decoding; the network never imports it, and nothing here changes a model.
"""
