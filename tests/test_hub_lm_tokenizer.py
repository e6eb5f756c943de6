"""The decoder-only families' tokenizers against ``AutoTokenizer`` (transformers, the test-only reference): ids of
40 texts, decoding, special ids, chat-template ids; and the caps on their files.

The folders (``lm_tokenizer_folders``) are tiny BPEs trained here with each family's pipeline and chat template.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from lm_tokenizer_folders import NAMES, TEXTS, build_folder, reference

from transformer.checkpoints.errors import CheckpointError
from transformer.hub.chat_template import ChatTemplateError
from transformer.hub.lm_tokenizer import load_lm_tokenizer

pytest.importorskip("transformers")

CHATS = [
    [{"role": "user", "content": "Hello there, how are you?"}],
    [{"role": "user", "content": "  Ünïcödé 東京 😀 and <|im_end|> <eos> [INST] inside  "}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello!"},
     {"role": "user", "content": "Again, with 3.14 and\nnew lines?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Why?"}],
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lm-tokenizers")
    return {name: build_folder(name, root) for name in NAMES}


def ours(folder: Path):  # noqa: ANN201
    config = json.loads((folder / "config.json").read_text())
    return load_lm_tokenizer(folder, config["model_type"], vocab_size=config["vocab_size"],
                             eos_token_id=config.get("eos_token_id"))


def copy(folders: dict[str, Path], name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(folders[name], tmp_path / name))


@pytest.mark.parametrize("name", NAMES)
def test_ids_decoding_and_specials_equal_autotokenizer(folders: dict[str, Path], name: str) -> None:
    tokenizer, ref = ours(folders[name]), reference(folders[name])
    assert len(TEXTS) >= 30
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert ids == ref(text)["input_ids"], text
        assert tokenizer.encode(text, add_special_tokens=False) == ref(text, add_special_tokens=False)["input_ids"]
        for skip in (True, False):
            assert tokenizer.decode(ids, skip_special_tokens=skip) == ref.decode(ids, skip_special_tokens=skip), text
    expected = set(ref.all_special_ids) | {i for i, t in ref.added_tokens_decoder.items() if t.special}
    assert tokenizer.special_ids == expected
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id) == (ref.bos_token_id, ref.eos_token_id,
                                                                       ref.pad_token_id)
    assert tokenizer.special_tokens == ref.special_tokens_map


@pytest.mark.parametrize("name", NAMES)
def test_chat_ids_equal_apply_chat_template(folders: dict[str, Path], name: str) -> None:
    tokenizer, ref = ours(folders[name]), reference(folders[name])
    if ref.chat_template is None:
        assert not tokenizer.has_chat_template
        with pytest.raises(CheckpointError, match="no chat template"):
            tokenizer.chat(CHATS[0])
        return
    for messages in CHATS:
        for prompt in (True, False):
            try:
                expected = ref.apply_chat_template(messages, add_generation_prompt=prompt, return_dict=False)
            except Exception as error:  # the template refuses these messages (Gemma: no system role)
                with pytest.raises(ChatTemplateError, match=str(error)[:30]):
                    tokenizer.chat(messages, add_generation_prompt=prompt)
                continue
            assert tokenizer.chat(messages, add_generation_prompt=prompt) == expected, (messages, prompt)
    if name == "qwen3":  # a template variable, as apply_chat_template's keyword arguments
        expected = ref.apply_chat_template(CHATS[0], add_generation_prompt=True, enable_thinking=False,
                                           return_dict=False)
        assert tokenizer.chat(CHATS[0], enable_thinking=False) == expected


@pytest.mark.parametrize("name", ["llama3", "llama2", "gemma2"])
def test_chat_has_one_bos(folders: dict[str, Path], name: str) -> None:
    """A template that writes bos_token is encoded without the post-processor's: one BOS, first."""
    tokenizer = ours(folders[name])
    ids = tokenizer.chat(CHATS[0])
    if name != "llama2":  # Zephyr's template writes no BOS, and transformers adds none
        assert ids[0] == tokenizer.bos_id
    assert ids.count(tokenizer.bos_id) == (0 if name == "llama2" else 1)
    assert tokenizer.encode("Hi")[0] == tokenizer.bos_id


@pytest.mark.parametrize(("name", "change"), [
    ("llama2", {"legacy": True}), ("llama2", {"add_prefix_space": False}), ("gpt2", {"add_prefix_space": True}),
    ("qwen2", {"split_special_tokens": True}), ("llama2", None), ("qwen3", None), ("gemma2", None), ("gpt2", None),
])
def test_tokenizer_config_settings(folders: dict[str, Path], tmp_path: Path, name: str, change: dict | None) -> None:
    """The settings that change a class's pipeline, and a folder without tokenizer_config.json (None: the class
    of its model_type, with that class's default special tokens and the file's added tokens)."""
    folder = copy(folders, name, tmp_path)
    path = folder / "tokenizer_config.json"
    if change is None:
        path.unlink()
    else:
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}), encoding="utf-8")
    tokenizer, ref = ours(folder), reference(folder)
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert ids == ref(text)["input_ids"], text
        assert tokenizer.decode(ids) == ref.decode(ids, skip_special_tokens=True), text
    assert tokenizer.special_ids == set(ref.all_special_ids) | {i for i, t in ref.added_tokens_decoder.items()
                                                                if t.special}


@pytest.mark.parametrize("name", ["llama2", "llama3", "qwen2"])
def test_bos_comes_from_the_post_processor(folders: dict[str, Path], tmp_path: Path, name: str) -> None:
    """transformers 5 ignores add_bos_token when the folder has a tokenizer.json: without the file's
    post-processor no BOS is added, whatever tokenizer_config.json says."""
    folder = copy(folders, name, tmp_path)
    document = json.loads((folder / "tokenizer.json").read_text())
    (folder / "tokenizer.json").write_text(json.dumps({**document, "post_processor": None}))
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "add_bos_token": True}))
    tokenizer, ref = ours(folder), reference(folder)
    assert tokenizer.encode("Hi there") == ref("Hi there")["input_ids"]
    assert tokenizer.bos_id not in tokenizer.encode("Hi there")


def test_eos_ids_from_generation_config(folders: dict[str, Path]) -> None:
    llama3 = ours(folders["llama3"])
    ref = reference(folders["llama3"])
    assert llama3.eos_ids == tuple(ref.convert_tokens_to_ids(["<|end_of_text|>", "<|eot_id|>"]))
    qwen = ours(folders["qwen2"])
    assert qwen.eos_ids == (qwen.eos_id,)


def test_display_pieces(folders: dict[str, Path]) -> None:
    """Byte-level pieces read as text with spaces and line breaks marked; a lone byte as <0xNN>."""
    gpt2 = ours(folders["gpt2"])
    ids = gpt2.encode("Hi  there\n😀")
    labels = gpt2.display_pieces(ids)
    assert "".join(labels).replace("␣", " ").replace("↵", "\n").replace("<0xF0><0x9F><0x98><0x80>", "😀") \
        .startswith("Hi  there\n")
    assert not any(c in "".join(labels) for c in "ĠĊ")
    llama2 = ours(folders["llama2"])
    labels = llama2.display_pieces(llama2.encode("Hi 😀"))
    assert labels[0] == "<s>" and labels[1].startswith("␣")
    assert labels[-4:] == ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]


def test_model_rows_past_the_tokenizer(folders: dict[str, Path]) -> None:
    """Qwen's embedding has rows the tokenizer does not use: they are ids, decoded as nothing."""
    qwen = ours(folders["qwen2"])
    ref = reference(folders["qwen2"])
    assert qwen.vocab_size == len(ref) + 7
    assert qwen.decode([qwen.vocab_size - 1]) == ""
    with pytest.raises(ValueError, match="out of range"):
        qwen.decode([qwen.vocab_size])


def test_chat_template_file_wins(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = copy(folders, "qwen2", tmp_path)
    (folder / "chat_template.jinja").write_text("{{ bos_token or '' }}X{{ messages[0]['content'] }}Y",
                                                encoding="utf-8")
    assert ours(folder).render_chat(CHATS[0]) == reference(folder).apply_chat_template(CHATS[0], tokenize=False)


def test_bad_files_name_file_and_field(folders: dict[str, Path], tmp_path: Path) -> None:
    folder = copy(folders, "llama3", tmp_path)
    config = json.loads((folder / "config.json").read_text())
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "tokenizer_class": "BertTokenizer"}))
    with pytest.raises(CheckpointError, match="tokenizer_class 'BertTokenizer'"):
        ours(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "chat_template": [{"name": "x",
                                                                                            "template": "y"}]}))
    with pytest.raises(CheckpointError, match="tokenizer_config.json: chat_template .* no 'default'"):
        ours(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, "x"]}))
    with pytest.raises(CheckpointError, match="generation_config.json: eos_token_id"):
        ours(folder)
    (folder / "generation_config.json").write_text("{")
    with pytest.raises(CheckpointError, match="generation_config.json: not valid JSON"):
        ours(folder)
    (folder / "generation_config.json").unlink()
    with pytest.raises(CheckpointError, match=r"tokenizer.json: model.vocab holds"):
        load_lm_tokenizer(folder, "llama", vocab_size=100)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no tokenizer.json") as caught:
        load_lm_tokenizer(folder, "llama", vocab_size=config["vocab_size"])
    assert str(tmp_path) not in str(caught.value)


def test_tokenizer_config_is_counted_against_the_vocabulary(folders: dict[str, Path], tmp_path: Path) -> None:
    """tokenizer_config.json may list thousands of added tokens (Gemma 3's), so it is capped by the model's
    vocabulary as tokenizer.json is: strings counted before it is parsed."""
    folder = copy(folders, "gemma2", tmp_path)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    settings["padding"] = ["x"] * 200_000
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    with pytest.raises(CheckpointError, match="tokenizer_config.json: holds more than"):
        ours(folder)
