"""Cached computation: what the pages draw, computed once per model, device and input and shared by every session
(``st.cache_resource``): one input through the model (``analysis``), decoding, explanations and word alignments
(``explain``, ``explain_alignment``), head statistics and patching (``heads``) and the head reports shipped with the
models (``head_reports``); the byte-bounded cache they use (``byte_cache``); the user's sentences
(``user_sentences``); a model's own positions (``positions``). Results are never modified after they are built.
Built figures are cached by ``ui.figures``.
"""
