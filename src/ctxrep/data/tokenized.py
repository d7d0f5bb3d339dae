"""The tokenized corpus: writer (the ``tokenize`` stage's work) and reader (pretraining's input).

Layout of ``data/tokenized/``::

    tokenizer.json vocab.txt tokenizer_config.json special_tokens_map.json   WordPiece (BERT)
    bilm_vocab.tsv  char_spec.json                                           biLM words, char ids
    train/shard-00000.arrow ...   validation/shard-00000.arrow ...           documents
    meta.json                                                                counts and settings

A shard is an Arrow IPC stream (``datasets.Dataset.from_file`` reads it) of documents with
columns ``doc_id``, ``sentences`` (raw sentence strings), ``words`` (per sentence, PTB-style
words for the biLM) and ``wordpieces`` (per sentence, WordPiece ids without specials). Document
and sentence boundaries are kept because BERT's next-sentence prediction needs consecutive
sentences of one document. The held-out split is chosen per document by a seeded hash.

Work is streamed in chunks of ``docs_per_shard`` documents over ``num_proc`` processes, so peak
memory depends on the chunk size and the vocabularies, not on the corpus size.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from ctxrep.text.segment import split_sentences, word_tokenize
from ctxrep.text.vocab import BOS

SPLITS = ("train", "validation")
SCHEMA = pa.schema([
    ("doc_id", pa.string()),
    ("sentences", pa.list_(pa.string())),
    ("words", pa.list_(pa.list_(pa.string()))),
    ("wordpieces", pa.list_(pa.list_(pa.int32()))),
])


def is_heldout(doc_id: str, fraction: float, seed: int) -> bool:
    digest = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass(frozen=True)
class SegmentOptions:
    min_sentence_words: int
    max_sentence_words: int
    heldout_fraction: float
    seed: int


def segment_document(text: str, opts: SegmentOptions) -> tuple[list[str], list[list[str]]]:
    """Sentences and their words; too-short sentences dropped, too-long ones cut."""
    sentences, words = [], []
    for sentence in split_sentences(text):
        w = word_tokenize(sentence)
        if len(w) < opts.min_sentence_words:
            continue
        sentences.append(sentence)
        words.append(w[: opts.max_sentence_words])
    return sentences, words


def write_shard(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)


def read_shard(path: Path) -> pa.Table:
    try:
        with pa.memory_map(str(path), "r") as source:
            return pa.ipc.open_stream(source).read_all()
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable Arrow stream ({e}); rerun the tokenize stage") from e


# ----------------------------------------------------------------------------- pass 1: segment

def _segment_chunk(job) -> dict:
    raw_dir, start, end, index, opts, out_dir = job
    import datasets

    docs = datasets.load_from_disk(raw_dir)["train"].select(range(start, end))
    rows = {split: {"doc_id": [], "sentences": [], "words": []} for split in SPLITS}
    counts, charset = Counter(), set()
    for doc in docs:
        sentences, words = segment_document(doc["text"], opts)
        if not sentences:
            continue
        split = "validation" if is_heldout(doc["doc_id"], opts.heldout_fraction, opts.seed) \
            else "train"
        rows[split]["doc_id"].append(doc["doc_id"])
        rows[split]["sentences"].append(sentences)
        rows[split]["words"].append(words)
        if split == "train":
            for w in words:
                counts.update(w)
            counts[BOS] += len(words)
            for sentence in sentences:
                charset.update(sentence)
    for split, cols in rows.items():
        if cols["doc_id"]:
            write_shard(Path(out_dir) / split / f"shard-{index:05d}.arrow", pa.table(cols))
    return {"counts": counts, "charset": charset,
            "docs": {s: len(rows[s]["doc_id"]) for s in SPLITS}}


# --------------------------------------------------------------------------- pass 2: wordpiece

_tokenizer = None


def _load_tokenizer(path: str):
    global _tokenizer
    from tokenizers import Tokenizer

    _tokenizer = Tokenizer.from_file(path)


def _encode_documents(docs: list[list[str]]) -> list[list[list[int]]]:
    """WordPiece ids per sentence of each document, with one tokenizer call per document.

    Sentences are joined with `` [SEP] `` (an added token, matched before normalization, and
    WordPiece never merges across whitespace), so splitting the ids at [SEP] gives exactly the
    per-sentence encodings at the cost of one Encoding object per document, not per sentence.
    A document whose text itself contains "[SEP]" is encoded sentence by sentence instead."""
    sep = _tokenizer.token_to_id("[SEP]")
    encodings = _tokenizer.encode_batch_fast([" [SEP] ".join(d) + " [SEP]" for d in docs],
                                             add_special_tokens=False)
    out = []
    for doc, enc in zip(docs, encodings):
        ids = enc.ids
        cuts = [i for i, t in enumerate(ids) if t == sep]
        if len(cuts) != len(doc):
            out.append([e.ids for e in _tokenizer.encode_batch_fast(doc, add_special_tokens=False)])
            continue
        starts = [0] + [c + 1 for c in cuts[:-1]]
        out.append([ids[a:b] for a, b in zip(starts, cuts)])
    return out


def _wordpiece_shard(job) -> dict:
    """Encode a shard's documents and append the ``wordpieces`` column."""
    import pyarrow.compute as pc

    src, dst = job
    table = read_shard(Path(src))
    wordpieces = _encode_documents(table.column("sentences").to_pylist())
    table = table.append_column("wordpieces", pa.array(wordpieces, SCHEMA.field("wordpieces").type))
    write_shard(Path(dst), table.cast(SCHEMA))
    n_sentences = pc.sum(pc.list_value_length(table.column("sentences"))).as_py() or 0
    n_words = pc.sum(pc.list_value_length(pc.list_flatten(table.column("words")))).as_py() or 0
    n_pieces = sum(len(s) for d in wordpieces for s in d)
    return {"docs": table.num_rows, "sentences": n_sentences, "words": n_words,
            "wordpieces": n_pieces}


# Held back from a pool's workers until they have set their own handlers (_worker_start).
WORKER_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _worker_start(initializer, initargs, mask) -> None:
    """A pool worker starts with a plain process's signal handling. Forked from a stage, it
    would inherit the stage's SIGTERM handler (a KeyboardInterrupt, ``ctxrep.stage``), and
    ``Pool.terminate``'s SIGTERM would then run the worker's exit code, which can leave the task
    queue's lock held and a sibling waiting on it, and the stage on the sibling, for ever. Ctrl-C
    is the stage's to handle: the whole process group gets it.

    The worker is forked with those signals blocked (:func:`run_pool`) and unblocks them
    (``mask``: the parent's mask before) only once its handlers are set: a SIGTERM sent while it
    starts waits, then kills it. Sent to the inherited handler instead, Python would only have
    flagged it, and the flag is dropped once the handler is SIG_DFL: a worker slow to start
    then outlives ``Pool.terminate`` and the pool's exit waits on it for ever
    (``tests/test_tokenize.py`` checks the mask at fork and once the worker has started)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if initializer is not None:
        initializer(*initargs)


def run_pool(fn, jobs, num_proc: int, desc: str, initializer=None, initargs=()):
    """Ordered map over jobs with a progress bar, in-process when ``num_proc == 1``."""
    from tqdm.auto import tqdm

    if num_proc == 1:
        if initializer:
            initializer(*initargs)
        yield from tqdm(map(fn, jobs), total=len(jobs), desc=desc, unit="shard", disable=None)
        return
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # processes already parallelise
    ctx = mp.get_context("fork")
    # Forked (and the pool's threads started) with WORKER_SIGNALS blocked: see _worker_start.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, WORKER_SIGNALS)
    try:
        pool = ctx.Pool(num_proc, initializer=_worker_start, initargs=(initializer, initargs, mask))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # one sent meanwhile arrives here
    with pool:
        yield from tqdm(pool.imap(fn, jobs), total=len(jobs), desc=desc, unit="shard", disable=None)


# ------------------------------------------------------------------------------------- reader

class TokenizedCorpus:
    """Read access to ``data/tokenized/`` (streaming, shard by shard)."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        meta = self.root / "meta.json"
        if not meta.exists():
            raise FileNotFoundError(f"{meta}: missing; run the tokenize stage first")
        self.meta = json.loads(meta.read_text())

    def shards(self, split: str) -> list[Path]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        return sorted((self.root / split).glob("shard-*.arrow"))

    def documents(self, split: str, columns: list[str] | None = None) -> Iterator[dict]:
        for path in self.shards(split):
            table = read_shard(path)
            if columns:
                table = table.select(columns)
            yield from table.to_pylist()

    def wordpiece_tokenizer(self):
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(self.root / "tokenizer.json"))

    def word_vocab(self) -> tuple[list[str], list[int]]:
        from ctxrep.text.vocab import load_word_vocab

        return load_word_vocab(self.root / "bilm_vocab.tsv")


# ------------------------------------------------------------------------------------- writer

def build(raw_dir: Path, out_dir: Path, p) -> dict:
    """Tokenize the raw corpus at ``raw_dir`` into ``out_dir`` (a temporary directory: the caller
    renames it into place). ``p`` is :class:`ctxrep.config.TokenizeParams`."""
    import datasets

    from ctxrep.text.elmo_chars import CharIdSpec
    from ctxrep.text.vocab import build_word_vocab, save_word_vocab
    from ctxrep.text.wordpiece import save_wordpiece, train_wordpiece

    from ctxrep.data.sources import verify

    verify(Path(raw_dir))
    raw_dataset = str(Path(raw_dir) / "dataset")
    n_docs = len(datasets.load_from_disk(raw_dataset)["train"])
    if n_docs == 0:
        raise ValueError(f"{raw_dir}: the corpus has no documents")
    opts = SegmentOptions(p.min_sentence_words, p.max_sentence_words, p.heldout_fraction, p.seed)
    seg_dir = out_dir / ".segmented"
    jobs = [(raw_dataset, s, min(s + p.docs_per_shard, n_docs), i, opts, str(seg_dir))
            for i, s in enumerate(range(0, n_docs, p.docs_per_shard))]
    counts, docs, charset = Counter(), Counter(), set()
    for result in run_pool(_segment_chunk, jobs, p.num_proc, "segment"):
        counts.update(result["counts"])
        docs.update(result["docs"])
        charset |= result["charset"]
    if docs["train"] == 0:
        raise ValueError(f"{raw_dir}: no document has a sentence of >= {p.min_sentence_words} words")
    if docs["validation"] == 0:
        raise ValueError(f"{raw_dir}: no document was held out; raise tokenize.heldout_fraction "
                         f"(now {p.heldout_fraction}) or use a larger corpus")

    # WordPiece is trained on the training sentences only, streamed shard by shard.
    def train_sentences():
        for path in sorted((seg_dir / "train").glob("*.arrow")):
            for sentences in read_shard(path).column("sentences").to_pylist():
                yield from sentences

    tokenizer = train_wordpiece(train_sentences(), p.wordpiece_vocab_size, p.lowercase, charset)
    save_wordpiece(tokenizer, out_dir, p.lowercase)

    words = build_word_vocab(counts, p.word_vocab_size)
    save_word_vocab(words, counts, out_dir / "bilm_vocab.tsv")
    spec = CharIdSpec(max_word_length=p.max_chars_per_word)
    (out_dir / "char_spec.json").write_text(json.dumps(spec.to_dict(), indent=2, sort_keys=True))

    jobs = [(str(src), str(out_dir / split / src.name))
            for split in SPLITS for src in sorted((seg_dir / split).glob("*.arrow"))]
    totals = {s: Counter() for s in SPLITS}
    for (src, _), result in zip(jobs, run_pool(_wordpiece_shard, jobs, p.num_proc, "wordpiece",
                                                _load_tokenizer, (str(out_dir / "tokenizer.json"),))):
        totals[Path(src).parent.name].update(result)
    import shutil

    shutil.rmtree(seg_dir)

    in_vocab = set(words)
    train_tokens = sum(c for w, c in counts.items() if w != BOS)
    meta = {
        "splits": {s: dict(sorted(totals[s].items())) for s in SPLITS},
        "wordpiece_vocab_size": tokenizer.get_vocab_size(),
        "word_vocab_size": len(words),
        "train_word_types": len(counts) - (1 if BOS in counts else 0),
        "train_oov_rate": round(sum(c for w, c in counts.items()
                                    if w not in in_vocab and w != BOS) / max(1, train_tokens), 6),
        # num_proc changes speed, never bytes: leave it out so outputs compare equal.
        "params": {k: getattr(p, k) for k in p.__dataclass_fields__ if k != "num_proc"},
    }
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return meta
