"""Sentence splitting and word tokenization for raw corpus text.

Both are deterministic regular-expression rules, chosen for speed on millions of words and for
tokens that look like the task data (PTB style: punctuation split off, ``n't`` and ``'s`` clitics
separate, hyphenated words and numbers kept whole).
"""

from __future__ import annotations

import re

# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace and
# an upper-case letter, digit or opening quote — unless the word before the period is a known
# abbreviation or a single capital (an initial).
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "etc", "no", "vol", "fig",
    "gen", "gov", "sen", "rep", "col", "lt", "sgt", "capt", "rev", "inc", "ltd", "co", "corp",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
    "e.g", "i.e", "u.s", "u.k", "ca", "approx", "dept", "est", "op", "pp", "ed", "eds",
}
_BOUNDARY = re.compile(r"""([.!?]+["')\]]*)\s+(?=["'(\[]?[A-Z0-9])""")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` (paragraphs separated by newlines) into sentences."""
    sentences = []
    for paragraph in text.split("\n"):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        start = 0
        for m in _BOUNDARY.finditer(paragraph):
            before = paragraph[start:m.start(1)]
            last_word = before.rsplit(None, 1)[-1].lower() if before.strip() else ""
            if m.group(1).startswith(".") and (
                    last_word.rstrip(".") in _ABBREVIATIONS
                    or (len(last_word) == 1 and last_word.isalpha())):
                continue
            sentences.append(paragraph[start:m.end(1)].strip())
            start = m.end()
        tail = paragraph[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


_WORD = re.compile(
    r"""(?:[A-Za-z]+(?=n't\b))|n't\b|'(?:s|re|ve|ll|d|m)\b|"""  # clitics: do|n't, it|'s
    r"""\w+(?:[-.]\w+)*|[^\w\s]""",                            # words, numbers, U.S, 1996-08-22
    re.UNICODE)


def word_tokenize(sentence: str) -> list[str]:
    """PTB-style words: ``"Don't stop."`` → ``["Do", "n't", "stop", "."]``."""
    return _WORD.findall(sentence)
