"""The tokenize stage's library: determinism, boundaries, held-out split, HF loadability."""

import os

import pytest

from ctxrep.config.composition import defaults
from ctxrep.data import registry, sources
from ctxrep.data.tokenized import TokenizedCorpus, build, is_heldout
from ctxrep.text.segment import split_sentences, word_tokenize
from tests.conftest import tree_hash


@pytest.fixture(scope="module")
def raw_corpus(tiny_mirror, tmp_path_factory):
    os.environ["CTXREP_DATA_MIRROR"] = str(tiny_mirror)
    out = tmp_path_factory.mktemp("raw") / "corpus"
    # the fixture mirror's shards are cut from the published ones: not the pinned bytes
    sources.fetch(registry.corpus("wikipedia"), "mirror", {}, out, verify_sha256=False)
    return out


def _params(**kw):
    base = dict(wordpiece_vocab_size=300, word_vocab_size=20, heldout_fraction=0.2,
                docs_per_shard=7, num_proc=1)
    return defaults("tokenize", **{**base, **kw})


def test_sentence_splitter_respects_abbreviations_and_initials():
    text = "Dr. Smith met J. F. Kennedy in the U.S. Army. Then he left! \"Why?\" she asked.\nNew."
    assert split_sentences(text) == ["Dr. Smith met J. F. Kennedy in the U.S. Army.",
                                     "Then he left!", '"Why?" she asked.', "New."]


def test_word_tokenizer_is_ptb_like():
    assert word_tokenize("Don't stop, it's 1996-08-22.") == \
        ["Do", "n't", "stop", ",", "it", "'s", "1996-08-22", "."]


def test_build_is_byte_identical_across_runs_and_processes(raw_corpus, tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    build(raw_corpus, tmp_path / "a", _params(num_proc=1))
    build(raw_corpus, tmp_path / "b", _params(num_proc=2))
    assert tree_hash(tmp_path / "a") == tree_hash(tmp_path / "b")


def test_documents_keep_sentences_and_split_by_document(raw_corpus, tmp_path):
    meta = build(raw_corpus, tmp_path, _params())
    corpus = TokenizedCorpus(tmp_path)
    train = list(corpus.documents("train"))
    val = list(corpus.documents("validation"))
    assert len(train) == meta["splits"]["train"]["docs"] and len(val) >= 1
    assert {d["doc_id"] for d in train}.isdisjoint({d["doc_id"] for d in val})
    assert all(is_heldout(d["doc_id"], 0.2, 0) for d in val)
    doc = train[0]
    assert len(doc["sentences"]) == len(doc["words"]) == len(doc["wordpieces"]) > 1
    tok = corpus.wordpiece_tokenizer()
    assert doc["wordpieces"][0] == tok.encode(doc["sentences"][0], add_special_tokens=False).ids
    words, counts = corpus.word_vocab()
    assert words[:3] == ["<S>", "</S>", "<UNK>"] and len(words) == 20
    assert counts[3:] == sorted(counts[3:], reverse=True)  # frequency order for the sampler


def test_transformers_loads_the_wordpiece_tokenizer(raw_corpus, tmp_path):
    from transformers import AutoTokenizer

    build(raw_corpus, tmp_path, _params())
    tok = AutoTokenizer.from_pretrained(str(tmp_path))
    enc = tok("The river bank", "plays music")
    assert tok.convert_ids_to_tokens(enc["input_ids"])[0] == "[CLS]"
    assert enc["token_type_ids"][-1] == 1
    assert tok.decode(enc["input_ids"], skip_special_tokens=True).startswith("the river bank")


def test_corpus_without_usable_sentences_is_an_error(tmp_path, monkeypatch):
    import datasets

    from ctxrep.data.schemas import CORPUS

    raw = tmp_path / "raw"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict(
        {"doc_id": ["1"], "title": ["t"], "text": ["Hi."]}, features=CORPUS)}).save_to_disk(
        str(raw / "dataset"))
    (raw / "MANIFEST.json").write_text('{"available": true, "outputs": {}}')
    (tmp_path / "out").mkdir()
    with pytest.raises(ValueError, match="no document has a sentence"):
        build(raw, tmp_path / "out", _params())


def test_document_encoding_equals_sentence_encoding(raw_corpus, tmp_path):
    """The one-call-per-document encoding (split at [SEP]) is exactly per-sentence encoding,
    including for a text that itself contains "[SEP]"."""
    from ctxrep.data import tokenized as T

    build(raw_corpus, tmp_path, _params())
    T._load_tokenizer(str(tmp_path / "tokenizer.json"))
    docs = [["The river bank.", "Un café à Paris!"], ["A [SEP] inside.", "x y z"]]
    expected = [[T._tokenizer.encode(s, add_special_tokens=False).ids for s in d] for d in docs]
    assert T._encode_documents(docs) == expected


def _sigterm_handler_name(_job) -> str:
    import signal

    return getattr(signal.getsignal(signal.SIGTERM), "name", "python handler")


_MASK_AT_FORK: set = set()


def _worker_signals(_job) -> tuple[bool, bool, str]:
    """(SIGTERM blocked when the worker was forked, blocked now, its handler now)."""
    import signal

    return (signal.SIGTERM in _MASK_AT_FORK,
            signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, []),
            _sigterm_handler_name(_job))


def test_pool_workers_are_forked_with_sigterm_held_until_their_handler_is_reset(monkeypatch):
    """A SIGTERM that reaches a worker before it has reset the stage's handler must not be lost
    (a worker that lost it outlived Pool.terminate and hung the pool's exit, under load): the
    worker is forked with SIGTERM blocked and unblocks it once its handler is SIG_DFL."""
    import signal

    from ctxrep.data import tokenized
    from ctxrep.stage import stop_on_signals

    start = tokenized._worker_start

    def recording_start(*args):
        _MASK_AT_FORK.update(signal.pthread_sigmask(signal.SIG_BLOCK, []))
        start(*args)

    monkeypatch.setattr(tokenized, "_worker_start", recording_start)
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        stop_on_signals()
        results = list(tokenized.run_pool(_worker_signals, range(4), 2, "probe"))
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
    assert results == [(True, False, "SIG_DFL")] * 4
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the parent's too


def test_pool_workers_die_on_sigterm_whatever_the_stage_set():
    """The stage turns SIGTERM into KeyboardInterrupt; its forked pool workers must not inherit
    that, or Pool.terminate can leave the task queue's lock held and hang the stage (it did)."""
    import signal

    from ctxrep.data.tokenized import run_pool
    from ctxrep.stage import stop_on_signals

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        stop_on_signals()
        assert list(run_pool(_sigterm_handler_name, range(4), 2, "probe")) == ["SIG_DFL"] * 4
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])
