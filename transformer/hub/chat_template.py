"""A model folder's chat template, rendered the way ``transformers``' ``apply_chat_template`` renders it, on a budget.

An instruct model was trained on prompts in its own format (ChatML's ``<|im_start|>user``, Llama 3's header
tokens, Gemma's ``<start_of_turn>``, Mistral's ``[INST]``); the folder says which with a Jinja2 template
(``chat_template.jinja``, or ``chat_template`` in tokenizer_config.json). ``transformers`` renders it in Jinja2's
``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and ``lstrip_blocks``, the ``loopcontrols`` extension, its
``{% generation %}`` tag, ``raise_exception``, ``strftime_now``, a ``tojson`` that does not escape HTML, and a
``namespace`` that refuses underscore names; the variables are ``messages``, ``tools``, ``documents``,
``add_generation_prompt`` and the tokenizer's named special tokens (``bos_token``, ``eos_token``, ...). This module
does the same (``render``), so a chat prompt gives the text ``apply_chat_template(..., tokenize=False)`` gives.

A template is code from the folder, and a folder may come from a visitor. The sandbox keeps it from Python's
internals and from changing the inputs; what it does not bound is time and memory (``range`` is capped at 10^5
items, but two nested loops are 10^10 steps, and ``'a' * 10**10`` one allocation). So, for every render:

- the template is at most ``MAX_TEMPLATE_CHARS`` (checked before Jinja parses it);
- the template's tree is rewritten before it is compiled: every ``for`` loop iterates through ``budget_iter``
  (the clock is read at every step), every piece of output (text and ``{{ }}`` alike, in macros and blocks too)
  is counted by ``budget_out`` against ``MAX_RENDERED_CHARS`` for the whole render, and ``~`` joins through
  ``budget_concat``, which measures its operands before joining them;
- every call, filter, attribute or item access, ``*``, ``**``, ``%`` and ``+`` reads the clock and measures its
  operands first: a value (string, list, dict, deep) is at most ``MAX_VALUE_SIZE``, an operation's result bound
  (its operands' sizes multiplied: ``join``, ``replace``, ``center``, ``indent``, ``tojson(indent=)``) at most
  ``MAX_OPERATION_SIZE``, an integer at most ``MAX_INT_BITS`` bits, a printf width at most ``MAX_FORMAT_WIDTH``;
  ``str.format`` (whose widths may come from strings) and the ``random`` filter (the process's generator) are
  not available;
- the render stops with a ``ChatTemplateError`` when ``seconds`` (``RENDER_SECONDS``) have passed.

The budget belongs to the render (a context variable of the calling thread), so one compiled template serves
every session at once. A template that calls ``raise_exception`` (roles that do not alternate, a system message
the model does not take) gives a ``ChatTemplateError`` with its message.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.runtime import LoopContext
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

MAX_TEMPLATE_CHARS = 2**17  # real templates are 1-15 K characters (Llama 3.1's ~6 K, Qwen3's ~4 K)
MAX_RENDERED_CHARS = 2**20  # everything a render outputs, in macros and blocks too
MAX_VALUE_SIZE = 2**20  # a string's characters, or a container's items and their strings' characters
MAX_OPERATION_SIZE = 2**24  # operands' sizes multiplied: what one call may allocate, at most ~64 MB
MAX_INT_BITS = 4096  # an integer a template computes (``**`` and ``*`` are checked before they run)
MAX_FORMAT_WIDTH = 10_000  # a printf width or precision ('%10000s')
RENDER_SECONDS = 2.0  # the clock a render may take; real templates take about a millisecond


class ChatTemplateError(ValueError):
    """A chat template that cannot be rendered: too large, not valid Jinja, over its budget, or one that raised
    (``raise_exception``) on these messages. The message says which."""


@dataclass
class _Budget:
    deadline: float
    output: int = 0
    entered: list[int] = field(default_factory=list)


_BUDGET: ContextVar[_Budget | None] = ContextVar("chat_template_budget", default=None)


def _tick() -> None:
    budget = _BUDGET.get()
    if budget is not None and time.monotonic() > budget.deadline:
        raise ChatTemplateError("the chat template took longer than its time budget to render")


def size_of(value: Any, limit: int = MAX_OPERATION_SIZE) -> int:
    """The size of ``value`` as the output it can make: a string's characters, a container's items plus theirs
    (deep), an integer's digits inside a container and its magnitude on its own (a width: ``center(10**9)``);
    the walk stops once past ``limit`` (its result then exceeds it)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return min(abs(value), limit + 1)
    total, stack = 0, [value]
    while stack and total <= limit:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            total += 1 + item.bit_length() // 3  # at least its decimal digits
        elif isinstance(item, Mapping):
            total += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            total += len(item)
            stack.extend(item)
        else:
            total += 1
    return total


def _check_value(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise ChatTemplateError(f"the chat template computed an integer of more than {MAX_INT_BITS} bits")
    if isinstance(value, str | list | tuple | dict | set) and size_of(value, MAX_VALUE_SIZE) > MAX_VALUE_SIZE:
        raise ChatTemplateError(f"the chat template built a value larger than {MAX_VALUE_SIZE:,} characters")
    return value


def _check_operation(subject: Any, arguments: Sequence[Any] = ()) -> None:
    """Read the clock; ChatTemplateError unless ``(1 + size of subject) * (1 + sizes of the arguments)`` is within
    MAX_OPERATION_SIZE: a bound on what a call, filter or operator on them can build (a join: the separator
    times the items; a replace: the text times the replacement; a width)."""
    _tick()
    product = (1 + size_of(subject)) * (1 + sum(size_of(argument) for argument in arguments))
    if product > MAX_OPERATION_SIZE:
        raise ChatTemplateError(f"an operation of the chat template could build more than "
                                f"{MAX_OPERATION_SIZE:,} characters")


_PRINTF = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(text: str) -> None:
    for width, precision in _PRINTF.findall(text):
        for number in (width, precision):
            if number == "*" or (number and int(number) > MAX_FORMAT_WIDTH):
                raise ChatTemplateError(f"a format in the chat template asks for a width over {MAX_FORMAT_WIDTH:,}")


def _binop(operator: str, left: Any, right: Any) -> Any:
    _tick()
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        if max(left.bit_length(), 1) * right > MAX_INT_BITS and abs(left) > 1:
            raise ChatTemplateError(f"the chat template computed an integer of more than {MAX_INT_BITS} bits")
    elif operator == "*" and isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise ChatTemplateError(f"the chat template computed an integer of more than {MAX_INT_BITS} bits")
    elif operator == "*":
        _check_operation(left, [right])
    elif operator == "%" and isinstance(left, str):
        _check_printf(left)
        _check_operation(left, [right])
    return None


class _GenerationTag(Extension):
    """``{% generation %}...{% endgeneration %}``: transformers marks the assistant's tokens with it; the text
    is the body's."""

    tags = {"generation"}

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class _Namespace(Namespace):
    """transformers' ``namespace``: no underscore-prefixed names (they lead to CPython's internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805  (Jinja's signature trick, so that self= works)
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check_name(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check_name(name)
        _check_value(value)
        Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a namespace cannot hold {name!r}")


class _Dict:
    """transformers' ``dict`` global: builds a dict, nothing else of the type is reachable."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:  # noqa: A002  (transformers' name)
    return datetime.now().strftime(format)


def _guarded_filter(function: Any) -> Any:
    """A filter that first reads the clock and measures its arguments (an environment or context passed to it
    is not an argument), and checks the size of what it returns."""

    @wraps(function)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        data = [a for a in args if not isinstance(a, jinja2.Environment | jinja2.runtime.Context
                                                   | jinja2.nodes.EvalContext)]
        if function is _FORMAT_FILTER and data and isinstance(data[0], str):
            _check_printf(data[0])
        _check_operation(data[0] if data else None, [*data[1:], *kwargs.values()])
        return _check_value(function(*args, **kwargs))

    return guarded


_FORMAT_FILTER = jinja2.filters.FILTERS["format"]


@jinja2.pass_context
def _budget_iter(context: Any, iterable: Any) -> Iterator[Any]:
    for item in iterable:
        _tick()
        yield item


@jinja2.pass_context
def _budget_out(context: Any, value: Any) -> str:
    text = str(value)
    budget = _BUDGET.get()
    if budget is not None:
        budget.output += len(text)
        if budget.output > MAX_RENDERED_CHARS:
            raise ChatTemplateError(f"the chat template wrote more than {MAX_RENDERED_CHARS:,} characters")
    _tick()
    return text


@jinja2.pass_context
def _budget_concat(context: Any, values: list[Any]) -> str:
    _tick()
    if sum(size_of(value) for value in values) > MAX_VALUE_SIZE:
        raise ChatTemplateError(f"the chat template built a value larger than {MAX_VALUE_SIZE:,} characters")
    return "".join(str(value) for value in values)


class _BudgetedSandbox(ImmutableSandboxedEnvironment):
    """transformers' environment, with every call, access and operator on the render's budget."""

    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self) -> None:
        super().__init__(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationTag, loopcontrols])
        self.filters = {name: _guarded_filter(f) for name, f in self.filters.items() if name != "random"}
        self.filters.update(tojson=_guarded_filter(_tojson), budget_iter=_budget_iter, budget_out=_budget_out,
                            budget_concat=_budget_concat)
        self.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now, dict=_Dict(),
                            namespace=_Namespace)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _binop(operator, left, right)
        if operator == "+" and not (isinstance(left, int | float) and isinstance(right, int | float)):
            _check_operation(None, [left, right])
        return _check_value(super().call_binop(context, operator, left, right))

    def getattr(self, obj: Any, attribute: str) -> Any:
        _tick()
        return _check_value(super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        _tick()
        return _check_value(super().getitem(obj, argument))

    def wrap_str_format(self, value: Any) -> Any:
        if super().wrap_str_format(value) is not None:
            raise jinja2.exceptions.SecurityError("str.format is not available in a chat template; use '%' or ~")
        return None

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level: iterated on the budget too
            args = (_budget_iter(__context, args[0]), *args[1:])
        owner = getattr(__obj, "__self__", None)
        _check_operation(owner if isinstance(owner, str | list | tuple | dict) else None, [*args, *kwargs.values()])
        return _check_value(super().call(__context, __obj, *args, **kwargs))


def _budget_tree(tree: nodes.Template) -> nodes.Template:
    """The template's tree with its loops, output and ``~`` on the budget (see the module's docstring)."""
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, "budget_iter", [], [], None, None, lineno=loop.lineno)
    for output in tree.find_all(nodes.Output):
        output.nodes = [nodes.Filter(child, "budget_out", [], [], None, None, lineno=child.lineno)
                        for child in output.nodes]
    for concat in list(tree.find_all(nodes.Concat)):
        concat.nodes = [nodes.Filter(nodes.List(concat.nodes, lineno=concat.lineno), "budget_concat", [], [], None,
                                     None, lineno=concat.lineno)]
    return tree


class ChatTemplate:
    """One compiled chat template, rendered on a budget; safe to share between threads."""

    def __init__(self, source: str, special_tokens: Mapping[str, str] | None = None) -> None:
        """``source``: the Jinja2 text; ``special_tokens``: the tokenizer's named special tokens (``bos_token``:
        ``<s>``, ...), which templates read as variables. ChatTemplateError when it is too large or not valid."""
        if not isinstance(source, str):
            raise ChatTemplateError("a chat template must be a string")
        if len(source) > MAX_TEMPLATE_CHARS:
            raise ChatTemplateError(f"the chat template holds {len(source):,} characters; at most "
                                    f"{MAX_TEMPLATE_CHARS:,} are read")
        self.source = source
        self.special_tokens = dict(special_tokens or {})
        environment = _BudgetedSandbox()
        token = _BUDGET.set(_Budget(time.monotonic() + RENDER_SECONDS))
        try:
            self._template = environment.from_string(_budget_tree(environment.parse(source)))
        except (jinja2.exceptions.TemplateError, RecursionError, MemoryError) as error:
            raise ChatTemplateError(f"the chat template is not valid Jinja: {_reason(error)}") from None
        finally:
            _BUDGET.reset(token)

    def render(self, messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool = True,
               seconds: float = RENDER_SECONDS, **variables: Any) -> str:
        """The prompt text of ``messages`` (each ``{"role": ..., "content": ...}``, strings), as
        ``apply_chat_template(messages, add_generation_prompt=..., tokenize=False)`` renders it; ``variables``
        are passed to the template as its keyword arguments are (``enable_thinking=False``). ChatTemplateError
        when the template raises, or is over its budget of ``seconds`` and sizes."""
        chat = [_message(m) for m in messages]
        if not chat:
            raise ChatTemplateError("a chat needs at least one message")
        context = {**self.special_tokens, **{k: _plain(v) for k, v in variables.items()}}
        token = _BUDGET.set(_Budget(time.monotonic() + seconds))
        try:
            return "".join(self._template.generate(messages=chat, tools=None, documents=None,
                                                   add_generation_prompt=bool(add_generation_prompt), **context))
        except ChatTemplateError:
            raise
        except (jinja2.exceptions.TemplateError, RecursionError, MemoryError) as error:
            raise ChatTemplateError(f"the chat template failed: {_reason(error)}") from None
        except (TypeError, ValueError, LookupError, ArithmeticError, AttributeError) as error:
            raise ChatTemplateError(f"the chat template failed on these messages: {_reason(error)}") from None
        finally:
            _BUDGET.reset(token)


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text[:300]


def _plain(value: Any) -> Any:
    """``value`` rebuilt from JSON types (str, int, float, bool, None, lists and dicts of them); others refused."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    raise ChatTemplateError(f"a chat template variable must be JSON data, not {type(value).__name__}")


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message as transformers passes it: JSON data, keys whose value is None dropped; it needs a role."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        raise ChatTemplateError("a chat message is a mapping with a 'role' string and its 'content'")
    return {str(k): _plain(v) for k, v in message.items() if v is not None}
