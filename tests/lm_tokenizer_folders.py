"""Tokenizer folders of the decoder-only families, built in a second without a download.

Each folder holds what a Hub folder holds for its tokenizer: ``config.json`` (its ``model_type`` and vocabulary,
which ``AutoTokenizer`` reads to pick a class), ``tokenizer.json`` as the ``tokenizers`` library writes it,
``tokenizer_config.json`` (the class, the special tokens, ``added_tokens_decoder``, the chat template) and
``generation_config.json``. The vocabularies are tiny BPEs trained here with the ``tokenizers`` library, each with
its family's pipeline:

| name | model_type | tokenizer_class | pipeline |
|---|---|---|---|
| gpt2 | gpt2 | GPT2Tokenizer | byte-level, GPT-2's regex, no BOS, no chat template |
| smollm2 | llama | GPT2Tokenizer | byte-level, GPT-2's regex, ChatML |
| llama3 | llama | PreTrainedTokenizerFast | byte-level, Llama-3's regex, ``ignore_merges``, BOS by the post-processor |
| llama2 | llama | LlamaTokenizer | SentencePiece BPE, byte fallback, Prepend + Replace (TinyLlama, Zephyr's) |
| mistral | mistral | LlamaTokenizer | SentencePiece BPE, byte fallback, Metaspace pre-tokeniser, [INST] |
| qwen2 | qwen2 | Qwen2Tokenizer | byte-level, Qwen's regex, NFC, ChatML with a default system prompt |
| qwen3 | qwen3 | Qwen2Tokenizer | as qwen2, Qwen3's template (thinking) |
| gemma2 | gemma2 | GemmaTokenizer | SentencePiece BPE without a dummy prefix, byte fallback, <start_of_turn> |
| gemma3_text | gemma3_text | GemmaTokenizer | as gemma2, Gemma 3's template and its image tokens |

The chat templates are short versions of the real ones, written with what the real ones use (``namespace``,
``raise_exception``, ``loop``, slicing, ``trim``, string methods). ``transformers`` is the test-only reference.
"""

from __future__ import annotations

import json
from pathlib import Path

from family_helpers import SENTENCES, WORDS

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
              r"\s+(?!\S)|\s+")

CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
          "{% endif %}")
QWEN2_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a "
    "helpful assistant.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if not "
    "(message.role == 'system' and loop.first) %}\n        {{- '<|im_start|>' + message.role + '\\n' + "
    "message.content + '<|im_end|>' + '\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n")
QWEN3_TEMPLATE = (
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}\n"
    "{%- for message in messages[::-1] %}\n    {%- set index = (messages|length - 1) - loop.index0 %}\n"
    "    {%- if ns.multi_step_tool and message.role == 'user' and not message.content.startswith('<tool_response>') "
    "%}\n        {%- set ns.multi_step_tool = false %}\n        {%- set ns.last_query_index = index %}\n"
    "    {%- endif %}\n{%- endfor %}\n{%- for message in messages %}\n"
    "    {%- if message.role == 'user' or message.role == 'system' %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n        {%- set content = message.content %}\n"
    "        {%- if '</think>' in content %}\n"
    "            {%- set content = content.split('</think>')[-1].lstrip('\\n') %}\n        {%- endif %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}\n    {%- endif %}\n"
    "{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}")
LLAMA3_TEMPLATE = (
    "{{- bos_token }}\n{%- if messages[0]['role'] == 'system' %}\n"
    "    {%- set system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n"
    "{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\\n\" }}\n"
    "{{- system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n"
    "    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n"
    "    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n")
ZEPHYR_TEMPLATE = (
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
    "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
    "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n"
    "{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}")
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}"
    "{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {{ message['content'] | trim }}\n    {{ '<end_of_turn>\n' }}\n{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n")

# name -> (model_type, tokenizer_class, pipeline, chat template)
FAMILIES = {
    "gpt2": ("gpt2", "GPT2Tokenizer", "gpt2", None),
    "smollm2": ("llama", "GPT2Tokenizer", "gpt2", CHATML),
    "llama3": ("llama", "PreTrainedTokenizerFast", "llama3", LLAMA3_TEMPLATE),
    "llama2": ("llama", "LlamaTokenizer", "sentencepiece", ZEPHYR_TEMPLATE),
    "mistral": ("mistral", "LlamaTokenizer", "metaspace", MISTRAL_TEMPLATE),
    "qwen2": ("qwen2", "Qwen2Tokenizer", "qwen", QWEN2_TEMPLATE),
    "qwen3": ("qwen3", "Qwen2Tokenizer", "qwen", QWEN3_TEMPLATE),
    "gemma2": ("gemma2", "GemmaTokenizer", "gemma", GEMMA_TEMPLATE),
    "gemma3_text": ("gemma3_text", "GemmaTokenizer", "gemma", GEMMA3_TEMPLATE),
}
NAMES = tuple(FAMILIES)

# The special tokens of each pipeline: (named ones of tokenizer_config.json, further special added tokens)
_SPECIALS = {
    "gpt2": ({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}, []),
    "smollm2": ({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>",
                 "pad_token": "<|im_end|>"}, ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>"]),
    "llama3": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
               ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|start_header_id|>",
                "<|end_header_id|>", "<|eot_id|>"]),
    "llama2": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "</s>"}, []),
    "mistral": ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, ["[INST]", "[/INST]"]),
    "qwen2": ({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None},
              ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>"]),
    "qwen3": ({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None},
              ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>"]),
    "gemma2": ({"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
               ["<start_of_turn>", "<end_of_turn>"]),
    "gemma3_text": ({"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>",
                     "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                     "image_token": "<image_soft_token>"},
                    ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>"]),
}
# Added tokens that are not special (Qwen's <think>, Gemma's runs of newlines): decode keeps them.
_PLAIN_ADDED = {"qwen2": ["<tool_call>"], "qwen3": ["<think>", "</think>"], "gemma2": ["\n\n"],
                "gemma3_text": ["\n\n", "<unused0>"]}
EXTRA_ROWS = {"qwen2": 7, "qwen3": 5, "gemma3_text": 3}  # embedding rows past the tokenizer's ids (Qwen pads to 64)

# Texts the tests encode: punctuation, digits, accents, emoji, CJK, runs of spaces and newlines, literal special
# tokens, an empty string.
TEXTS = [*SENTENCES, "東京は日本の首都です。", "中文分词测试：你好，世界！", "한국어 텍스트", "emoji 👩‍👩‍👧 🇩🇪 ✨✨",
         "    four leading spaces", "trailing spaces    ", "\n\nnewlines first", "lines\r\nwith CRLF\r\n",
         "mixed\t\ttabs  and   spaces", "  ", "'s 'll 'VE don't", "a<|im_end|>b <|endoftext|>", "<bos>x<eos>",
         "<start_of_turn>user", "[INST] hi [/INST]", "12345678901234567890", "3.14159, 2.71828; 1,000,000",
         "NFC: e\u0301 vs é", "<think>\nhm\n</think>", "ÀÉÎÕÜ àéîõü ñÑ çÇ ß", "<0x41> is not a byte piece", ""]


def corpus() -> list[str]:
    """The training texts: the words and sentences of ``family_helpers`` many times over, shuffled the same way."""
    import random

    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) for _ in range(600)]
    return lines + SENTENCES * 5


def _byte_level(name: str, pipeline: str, size: int):  # noqa: ANN202  (a tokenizers.Tokenizer)
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    llama3, qwen = pipeline == "llama3", pipeline == "qwen"
    tokenizer = Tokenizer(models.BPE(ignore_merges=llama3))
    if llama3 or qwen:
        regex = Regex(LLAMA3_REGEX if llama3 else QWEN_REGEX)
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(regex, behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if qwen and name == "qwen2":  # qwen3's file leaves NFC out: Qwen2Tokenizer adds it all the same
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus(), trainer)
    if name == "gpt2":  # an older file's setting, which GPT2Tokenizer replaces by tokenizer_config.json's (False)
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    byte_level = processors.ByteLevel(trim_offsets=False)
    tokenizer.post_processor = byte_level
    return tokenizer


def _sentencepiece(pipeline: str, size: int, specials: list[str]):  # noqa: ANN202  (a tokenizers.Tokenizer)
    """A SentencePiece-style BPE as ``convert_slow_tokenizer`` writes one: the special pieces first, then the 256
    byte pieces <0x00>..<0xFF>, then the learned pieces; characters outside them fall back to bytes."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    trainee = Tokenizer(models.BPE())
    gemma = pipeline == "gemma"
    trainee.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never" if gemma else "always")
    trainer = trainers.BpeTrainer(vocab_size=size, show_progress=False, limit_alphabet=60)
    trainee.train_from_iterator(corpus(), trainer)
    learned = json.loads(trainee.to_str())["model"]
    pieces = [*specials, *(f"<0x{b:02X}>" for b in range(256))]
    pieces += [p for p in sorted(learned["vocab"], key=learned["vocab"].get) if p not in pieces]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in learned["merges"]]
    unk = "<unk>"
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, byte_fallback=True, fuse_unk=True))
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if gemma:
        tokenizer.normalizer = normalizers.Replace(" ", "▁")
    elif pipeline == "metaspace":
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
        steps.append(decoders.Strip(" ", 1, 0))
    else:
        tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        steps.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(steps)
    return tokenizer


def _token(content: str, special: bool) -> dict:
    return {"content": content, "lstrip": False, "normalized": not special, "rstrip": False, "single_word": False,
            "special": special}


def build_folder(name: str, root: Path, *, size: int = 400) -> Path:
    """Write the tokenizer folder of ``name`` (one of ``NAMES``) under ``root`` and return it."""
    from tokenizers import AddedToken, processors

    model_type, tokenizer_class, pipeline, template = FAMILIES[name]
    named, specials = _SPECIALS[name]
    sentencepiece = pipeline in ("sentencepiece", "metaspace", "gemma")
    if sentencepiece:
        first = ["<unk>", "<s>", "</s>"] if pipeline != "gemma" else ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
        tokenizer = _sentencepiece(pipeline, size, first)
        tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in first])
    else:
        tokenizer = _byte_level(name, pipeline, size)
        first = ["<|endoftext|>"] if pipeline == "gpt2" and name == "gpt2" else []
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in first + specials])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in _PLAIN_ADDED.get(name, [])])
    bos = named.get("bos_token")
    if name == "llama3":
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                          special_tokens=[(bos, tokenizer.token_to_id(bos))])])
    elif sentencepiece:
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tokenizer.token_to_id(bos))])
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    added = {str(i): _token(t.content, t.special) for i, t in sorted(tokenizer.get_added_tokens_decoder().items())}
    if name == "smollm2":  # tokenizer_config.json's flags win over the file's; a named token is special regardless
        for entry in added.values():
            if entry["content"] in ("<|im_end|>", "<repo_name>"):
                entry["special"] = False
    settings = {"tokenizer_class": tokenizer_class, "model_max_length": 4096, "clean_up_tokenization_spaces": False,
                "added_tokens_decoder": added, **named}
    if sentencepiece and pipeline != "gemma":
        settings.update(add_bos_token=True, add_eos_token=False, legacy=False)
    if template is not None:
        settings["chat_template"] = template
    if name.startswith("qwen"):
        settings["additional_special_tokens"] = specials[1:]
    vocab_size = tokenizer.get_vocab_size(with_added_tokens=True) + EXTRA_ROWS.get(name, 0)
    ids = {key: tokenizer.token_to_id(value) for key, value in named.items() if value}
    config = {"model_type": model_type, "vocab_size": vocab_size, "bos_token_id": ids.get("bos_token"),
              "eos_token_id": ids.get("eos_token")}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, ensure_ascii=False), encoding="utf-8")
    eos = ids.get("eos_token")
    if name == "llama3":
        eos = [tokenizer.token_to_id("<|end_of_text|>"), tokenizer.token_to_id("<|eot_id|>")]
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": ids.get("bos_token"),
                                                               "eos_token_id": eos}), encoding="utf-8")
    return folder


def reference(folder: Path):  # noqa: ANN201  (a transformers tokenizer)
    """``AutoTokenizer.from_pretrained(folder)``, its warnings silenced."""
    import warnings

    from transformers import AutoTokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AutoTokenizer.from_pretrained(folder)
