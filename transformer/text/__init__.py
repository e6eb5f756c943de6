"""Text: the reserved ids, tokenizers (SentencePiece and characters), and the data to train on.

``ids`` (reserved ids, encoder/decoder sequences), ``tokenizers``, ``tasks`` (built-in generated
tasks; ``sentences`` the English -> German grammar behind one of them, its words in ``lexicon``),
``domains`` (what a task's model learned), ``cleaning`` (the text the pipeline takes) and ``pairs``
(a user's TSV/CSV pairs, and the train/valid/test ``Splits`` both become). Imports nothing from the rest of
the package but the shared argument checks (``transformer.checks``); may be imported by training,
decoding, the pipeline and the app.
"""
