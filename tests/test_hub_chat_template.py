"""A chat template is code from a model folder: rendered in the sandbox, on a budget of time, output and sizes.

Each hostile template below would, rendered as ``transformers`` renders it, run for a quarter of an hour or more
(10^7 empty loop steps took 0.9 s there, on this machine) or allocate gigabytes; here each one stops with a
ChatTemplateError within the budget of time, or before the allocation. Real templates render the same text as
transformers (test_hub_lm_tokenizer).
"""

from __future__ import annotations

import time
import tracemalloc

import pytest

from transformer.hub.chat_template import (
    MAX_OPERATION_SIZE,
    MAX_RENDERED_CHARS,
    MAX_TEMPLATE_CHARS,
    MAX_VALUE_SIZE,
    ChatTemplate,
    ChatTemplateError,
)

HELLO = [{"role": "user", "content": "Hello"}]
BUDGET = 0.3  # seconds given to a render here: the loops below would take hours


def render(source: str, messages: list | None = None, **options: object) -> str:
    return ChatTemplate(source, {"bos_token": "<s>", "eos_token": "</s>"}).render(messages or HELLO, **options)


def test_real_template_features_render() -> None:
    source = ("{%- set ns = namespace(n=0) %}{% for m in messages[::-1] %}{% set ns.n = ns.n + 1 %}{% endfor %}"
              "{{ bos_token }}{% for m in messages %}{{ m.role|upper ~ ':' ~ m['content']|trim }}"
              "{% if not loop.last %}|{% endif %}{% endfor %}{{ ns.n }}{{ {'a': 1}|tojson }}{{ '%d%%' % 5 }}"
              "{% generation %}G{% endgeneration %}"
              "{% for x in [1, 2, 3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}"
              "{% if add_generation_prompt %}>{% endif %}")
    assert render(source) == '<s>USER:Hello1{"a": 1}5%G13>'


def test_raise_exception_names_the_reason() -> None:
    with pytest.raises(ChatTemplateError, match="roles must alternate"):
        render("{{ raise_exception('roles must alternate') }}")


def test_template_size_is_capped_before_parsing() -> None:
    with pytest.raises(ChatTemplateError, match="characters; at most"):
        ChatTemplate("x" * (MAX_TEMPLATE_CHARS + 1))


@pytest.mark.parametrize("source", [
    # 10^10 empty steps: about 15 minutes without a budget
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
    "{% set r = range(100000)|list %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}",  # no call inside
    "{% macro f(d) %}{% for i in range(100000) %}{% if d %}{{ f(d - 1) }}{% endif %}{% endfor %}{% endmacro %}"
    "{{ f(3) }}",
    "{% for i in range(100000) recursive %}{% if loop.depth < 4 %}{{ loop(range(100000)) }}{% endif %}{% endfor %}",
])
def test_loops_stop_at_the_time_budget(source: str) -> None:
    start = time.monotonic()
    with pytest.raises(ChatTemplateError, match="time budget|more than"):
        render(source, seconds=BUDGET)
    assert time.monotonic() - start < BUDGET + 1.0  # the clock is read at every step: one step past the budget


@pytest.mark.parametrize("source", [
    "{{ 'a' * 10**10 }}",  # 10 GB at once
    "{{ ['a'] * 10**10 }}",
    "{{ 2 ** 10000000000 }}",  # an integer of 10^10 bits: Python computes it for minutes, in 1.2 GB
    "{% set n = 2 ** 4000 %}{{ n * n }}",
    "{{ 'a'|center(10**9) }}",
    "{{ 'a'.ljust(1000000000) }}",
    "{{ '%1000000000s' % 'a' }}",
    "{{ '%*s'|format(1000000000, 'a') }}",
    "{{ '{:>1000000000}'.format('a') }}",
    "{{ '{0:{1}}'.format('a', '999999999') }}",
    "{{ messages|tojson(indent=100000000) }}",
    "{% set s = 'a' * 1000000 %}{{ (" + " ~ ".join(["s"] * 200) + ")|length }}",  # 200 MB joined at once
    "{% set s = 'a' * 10000 %}{{ s.replace('', s)|length }}",  # 10^8 characters from two of 10^4
    "{% set s = 'ab' * 500000 %}{{ ([s] * 1000)|join|length }}",  # a 10^9-character join of a short list
    "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
])
def test_allocations_are_measured_before_they_happen(source: str) -> None:
    start = time.monotonic()
    tracemalloc.start()
    try:
        with pytest.raises(ChatTemplateError):
            render(source, seconds=5.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 2.0  # refused by its size, not by the clock
    # nothing refused was allocated: the largest allowed value is a 1-byte-per-character string of
    # MAX_OPERATION_SIZE characters, held with its operands and one copy
    assert peak < 4 * MAX_OPERATION_SIZE


def test_output_is_capped_in_macros_too() -> None:
    """Text written inside a macro is counted when written, not when the macro's result is output."""
    chunk = "x" * 1000
    source = (f"{{% macro m() %}}{{% for i in range(100000) %}}{chunk}{{% endfor %}}{{% endmacro %}}"
              "{% set t = m() %}done")
    with pytest.raises(ChatTemplateError, match=f"more than {MAX_RENDERED_CHARS:,} characters"):
        render(source)


def test_large_but_fair_values_render() -> None:
    """A long message (half the value cap) goes through every common operation."""
    text = "word " * (MAX_VALUE_SIZE // 10)
    source = "{{ messages[0]['content']|trim|length }} {{ (messages[0].content.split(' ')|length) }}"
    assert render(source, [{"role": "user", "content": text}]) == f"{len(text.strip())} {MAX_VALUE_SIZE // 10 + 1}"


@pytest.mark.parametrize("source", [
    "{{ ().__class__.__bases__.__subclasses__() }}",
    "{{ namespace(_x=1) }}",
    "{{ messages|random }}",  # the process's random generator: not available
    "{% include 'x' %}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",  # recursion
    "{{ messages.append(1) }}",  # the immutable sandbox
    "{% for %}",
])
def test_sandbox_refusals_are_chat_template_errors(source: str) -> None:
    with pytest.raises(ChatTemplateError):
        render(source)


def test_private_attributes_are_undefined() -> None:
    assert render("{{ messages.__class__ }}{{ ''.__class__ }}") == ""


def test_messages_must_be_json_data() -> None:
    with pytest.raises(ChatTemplateError, match="JSON data"):
        render("{{ messages }}", [{"role": "user", "content": object()}])
    with pytest.raises(ChatTemplateError, match="role"):
        render("{{ messages }}", [{"content": "x"}])
    assert render("{{ messages[0].keys()|list }}", [{"role": "user", "content": "x", "name": None}]) == \
        "['role', 'content']"
