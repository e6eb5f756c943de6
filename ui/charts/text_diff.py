"""Two texts side by side with the words that differ marked: nothing cut, wrapped, HTML-escaped.

A translation compared with another (clean vs corrupted input, every head vs some heads off) matters
exactly where the two differ, so both are shown in full and the differing words are marked, the way
a word-level diff marks them (difflib's longest matching blocks, Ratcliff & Obershelp).
"""

from __future__ import annotations

import difflib
import html

MARK_STYLE = "background:#ffe08a;border-radius:3px;padding:0 2px;font-weight:600"


def by_characters(a: str, b: str) -> bool:
    """Texts without spaces (a reversed or sorted string) are compared character by character."""
    return not any(c.isspace() for c in a.strip() + b.strip())


def word_diff(a: str, b: str) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """Each text's words (split on spaces; characters for texts without spaces) with whether it differs
    from the other text."""
    left, right = (list(a.strip()), list(b.strip())) if by_characters(a, b) else (a.split(), b.split())
    a_marks, b_marks = [True] * len(left), [True] * len(right)
    for block in difflib.SequenceMatcher(a=left, b=right, autojunk=False).get_matching_blocks():
        a_marks[block.a:block.a + block.size] = [False] * block.size
        b_marks[block.b:block.b + block.size] = [False] * block.size
    return list(zip(left, a_marks, strict=True)), list(zip(right, b_marks, strict=True))


def marked_html(words: list[tuple[str, bool]], separator: str = " ") -> str:
    """Words as HTML, the differing ones marked; "(empty)" for no words."""
    if not words:
        return "<i>(empty)</i>"
    return separator.join(f'<span style="{MARK_STYLE}">{html.escape(w)}</span>' if changed else html.escape(w)
                    for w, changed in words)


def compared_html(label_a: str, a: str, label_b: str, b: str) -> str:
    """Both texts in full, one per line under its label, differing words marked."""
    left, right = word_diff(a, b)
    sep = "" if by_characters(a, b) else " "
    block = '<div style="margin:0.2rem 0 0.6rem 0;line-height:1.7;overflow-wrap:anywhere">'
    return (f"{block}<b>{html.escape(label_a)}</b><br>{marked_html(left, sep)}</div>"
            f"{block}<b>{html.escape(label_b)}</b><br>{marked_html(right, sep)}</div>")
