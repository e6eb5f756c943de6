"""Hugging Face folders (Marian, T5, BART, mBART-50, M2M100/NLLB): read one as our own model, exactly as
``transformers`` computes it.

Each family is the encoder-decoder of "Attention Is All You Need" with a few switches (Marian: SiLU
feed-forward, its sinusoid layout, no final LayerNorm, a logits bias, its own special ids; T5: RMSNorm and
relative position buckets; BART: learned positions and an embedding norm), so it maps onto ``TransformerConfig``
and our modules; nothing is re-implemented.

- ``folder``: which files a Hugging Face folder holds, and how to tell one from our own checkpoints;
- ``families/``: one file per model_type, each declaring its ``Family`` (its config.json reader, weight-name
  tables, embedding and logits rules, tokenizer, display name, default languages, examples); the registry is
  what the folder holds, and ``family_of`` refuses any other type by name;
- ``family_config``: what a ``Family`` is and the helpers its config reader uses (torch-free);
- ``mapping``: the one machinery that reads every family's tables (their tensors -> our state dict, the shapes
  their files must hold);
- ``tokenizer``: ``MarianTokenizer``'s behaviour on source.spm / target.spm / vocab.json;
- ``fast_tokenizer``: tokenizer.json (T5, BART, mBART-50, NLLB) as ``AutoTokenizer`` reads it;
- ``tokenizer_json``: a tokenizer.json's entries capped for its model before it is parsed, its padding and
  truncation dropped, Rust panics as ValueErrors (any family);
- ``lm_tokenizer`` (with ``lm_pipelines``): tokenizer.json of a decoder-only folder (GPT-2, Llama, Mistral, Qwen,
  Gemma) as ``AutoTokenizer`` 5 builds it, its BOS rule, special ids and ``eos_ids``;
- ``chat_template``: a folder's chat template rendered as ``apply_chat_template`` does, in Jinja2's sandbox, on a
  budget of time, output and sizes;
- ``languages``, ``generation``: language codes and the decoding rules of generation_config.json;
- ``memory``: a model's memory against the memory free, before anything is built;
- ``load``: ``load_hf``, every family through one loader;
- ``download``: ``python -m transformer.hub download Helsinki-NLP/opus-mt-en-de`` (huggingface_hub, optional).

See docs/families.md.

``transformers`` itself is never imported here: it is a test-only reference.
"""
