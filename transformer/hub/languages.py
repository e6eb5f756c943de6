"""Language codes of multilingual models (mBART-50, NLLB) and the decoding rules a model's folder asks for.

A multilingual model reads ``[source code] tokens </s>`` and is made to write in a language by forcing that
language's code as the first generated token (``forced_bos_token_id``), as ``transformers``' translation pipeline
does: the source code is the tokenizer's ``src_lang``, the target code ``tgt_lang``. The codes are the tokenizer's
added tokens of the family's form (``en_XX``, ``de_DE``; ``eng_Latn``, ``deu_Latn``). The defaults are
``tokenizer_config.json``'s ``src_lang`` / ``tgt_lang``, else English -> German.

A ``Pipeline`` is shared (the app caches one per model for every browser session), so a caller that wants other
languages without changing it for everyone else takes a view: ``pipe.with_languages(src, tgt)``, a new pipeline
over the same model and tokenizers.
"""

from __future__ import annotations

import copy
from typing import Any, Self

from ..decoding.processors import GenerationRules
from ..network.config import TransformerConfig
from ..text.cleaning import clean_text
from ..text.tokenizers import Tokenizer
from .families import family_or_none

# ISO 639-3 names of NLLB-200's languages that Babel's English names lack (codes as the NLLB paper lists them,
# Costa-jussà et al. 2022, table 1); every other code of NLLB-200 and mBART-50 Babel names.
_UNNAMED_BY_BABEL = {
    "acm": "Mesopotamian Arabic", "acq": "Ta'izzi-Adeni Arabic", "ajp": "South Levantine Arabic",
    "apc": "North Levantine Arabic", "azb": "South Azerbaijani", "cjk": "Chokwe", "fuv": "Nigerian Fulfulde",
    "hne": "Chhattisgarhi", "kbp": "Kabiyè", "pbt": "Southern Pashto", "quy": "Ayacucho Quechua", "taq": "Tamasheq",
}


def language_name(code: str) -> str | None:
    """The English name of a multilingual model's language code, from its language part: "deu_Latn" -> "German"
    (ISO 639-3, NLLB), "et_EE" -> "Estonian" (ISO 639-1, mBART-50); None for a code no table names. Babel's CLDR
    names, its aliases taking a 639-3 code to the 639-1 one where there is one ("deu" -> "de")."""
    from babel import Locale
    from babel.core import get_global

    language = code.split("_")[0].lower()
    names = Locale("en").languages
    alias = get_global("language_aliases").get(language)
    return names.get(language) or (names.get(alias) if alias else None) or _UNNAMED_BY_BABEL.get(language)


def language_codes(tokenizer: Tokenizer) -> dict[str, int]:
    """Code -> id of the languages a multilingual tokenizer knows; {} for any other tokenizer."""
    return dict(getattr(tokenizer, "lang_code_ids", None) or {})


def check_language(code: str | None, tokenizer: Tokenizer, side: str) -> str | None:
    """``code`` if the tokenizer knows it (None stays None for a model without language codes); ValueError
    listing the choices otherwise."""
    codes = language_codes(tokenizer)
    if not codes:
        if code is not None:
            raise ValueError(f"this model has no language codes, so {side}_lang={code!r} cannot be chosen")
        return None
    if code not in codes:
        raise ValueError(f"unknown {side} language code {code!r}; choose one of {', '.join(codes)}")
    return code


def default_languages(tokenizer: Tokenizer, meta: dict[str, Any]) -> tuple[str | None, str | None]:
    """(source, target) codes by default: tokenizer_config.json's, else the family's (``Family.default_languages``:
    English -> German), else the first two."""
    codes = language_codes(tokenizer)
    if not codes:
        return None, None
    saved = meta.get("tokenizer_settings") or {}
    family = family_or_none(meta.get("model_type"))
    fallback = family.default_languages if family else (None, None)
    src, tgt = (next(c for c in (saved.get(key), default, *codes) if c in codes)
                for key, default in zip(("src_lang", "tgt_lang"), fallback, strict=True))
    return src, tgt


def generation_rules(meta: dict[str, Any], config: TransformerConfig, tgt_tokenizer: Tokenizer,
                     tgt_lang: str | None) -> GenerationRules | None:
    """The forced and forbidden tokens of every decoding: the target language's code (or the folder's
    ``forced_bos_token_id``, BART's ``<s>``) first, ``forced_eos_token_id`` at the length bound, ``bad_words_ids``
    never, no repeated ``no_repeat_ngram_size``-gram, no ``</s>`` before ``min_length``; for a Hugging Face folder
    PAD stays in the distribution, as in ``generate`` (``GenerationRules.pad_allowed``). None for a model that asks
    for none (our own checkpoints)."""
    settings = meta.get("generation") or {}
    codes = language_codes(tgt_tokenizer)
    forced_bos = codes[tgt_lang] if tgt_lang in codes else settings.get("forced_bos_token_id")
    forced_eos = settings.get("forced_eos_token_id")
    bad_words = tuple(tuple(word) for word in settings.get("bad_words_ids", ()))
    limit = config.tgt_vocab_size
    for token in (forced_bos, forced_eos, *(t for word in bad_words for t in word)):
        if token is not None and not 0 <= token < limit:
            raise ValueError(f"generation_config.json names token id {token}, past the vocabulary ({limit})")
    no_repeat, min_length = settings.get("no_repeat_ngram_size", 0), settings.get("min_length", 0)
    hub = meta.get("source") == "huggingface"  # decoded as generate() decodes it: PAD stays a candidate
    if not hub and forced_bos is None and forced_eos is None and not bad_words and not no_repeat and not min_length:
        return None
    return GenerationRules(forced_bos_id=forced_bos, forced_eos_id=forced_eos, bad_words_ids=bad_words,
                           eos_id=config.eos_id, no_repeat_ngram_size=no_repeat, min_length=min_length,
                           pad_allowed=hub)


class LanguageChoice:
    """The language codes of a ``Pipeline`` (mixed in): ``src_lang`` / ``tgt_lang``, settable and checked; setting
    ``tgt_lang`` re-derives the decoding rules (its code is the forced first token)."""

    _src_lang: str | None
    _tgt_lang: str | None
    _rules: GenerationRules | None
    _src_tokenizer: Tokenizer
    _tgt_tokenizer: Tokenizer
    _meta: dict[str, Any]
    config: TransformerConfig

    @property
    def language_codes(self) -> list[str]:
        """The language codes ``src_lang`` / ``tgt_lang`` may be set to; [] for a model without them."""
        return list(language_codes(self._tgt_tokenizer))

    @property
    def src_lang(self) -> str | None:
        """The source language's code, put before the source's tokens; None for a model without codes."""
        return self._src_lang

    @src_lang.setter
    def src_lang(self, code: str) -> None:
        self._src_lang = check_language(code, self._src_tokenizer, "source")

    @property
    def tgt_lang(self) -> str | None:
        """The target language's code, forced as the first generated token; None for a model without codes."""
        return self._tgt_lang

    @tgt_lang.setter
    def tgt_lang(self, code: str) -> None:
        code = check_language(code, self._tgt_tokenizer, "target")
        self._rules = generation_rules(self._meta, self.config, self._tgt_tokenizer, code)
        self._tgt_lang = code

    @property
    def generation_rules(self) -> GenerationRules | None:
        """The forced and forbidden tokens every decoding of this model applies (None: none)."""
        return self._rules

    def with_languages(self, src_lang: str | None = None, tgt_lang: str | None = None) -> Self:
        """A view of this pipeline with other language codes (None: this one's): a new object sharing the model,
        the tokenizers and the meta, so it costs nothing; this pipeline is left as it is. ValueError for a code the
        model does not know."""
        view = copy.copy(self)
        view.src_lang = self._src_lang if src_lang is None else src_lang  # the setters check the codes
        view.tgt_lang = self._tgt_lang if tgt_lang is None else tgt_lang
        return view

    def source_prefix(self) -> list[int]:
        """What the encoder reads before the source's tokens: BART's ``<s>``, mBART-50's and NLLB's source language
        code; [] for the others (Marian, T5, our own)."""
        prefix = getattr(self._src_tokenizer, "source_prefix", None)
        return list(prefix(self._src_lang)) if prefix is not None else []

    @property
    def target_prefix(self) -> list[int]:
        """What every output of ``generate`` starts with before its tokens: the decoder start id
        (``config.bos_id``: T5 and Marian the pad id, BART / mBART-50 / NLLB ``</s>``, ours ``<s>``), then the
        forced first token where the model has one (BART's ``<s>``, a multilingual model's target code)."""
        forced = self._rules.forced_bos_id if self._rules is not None else None
        return [self.config.bos_id, *([] if forced is None else [forced])]

    def target_ids(self, text: str) -> list[int]:
        """A reference translation as the decoder is teacher-forced on it: ``target_prefix``, the target tokens of
        the cleaned ``text``, ``</s>``; the same ids greedy decoding produces when it writes that text (the decoder
        reads all but the last, and predicts all but the first). ValueError for a text that is empty once
        cleaned."""
        return [*self.target_prefix, *self._tgt_tokenizer.encode(clean_text(text)), self.config.eos_id]
