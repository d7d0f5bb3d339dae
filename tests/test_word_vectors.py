"""Static word vectors: lookups (OOV → zero, case folding), the saved format, word2vec training."""

import random

import numpy as np
import pytest

from ctxrep import config
from ctxrep.errors import InputError
from ctxrep.models.word_vectors import WordVectors
from ctxrep.pretraining.word2vec import train_flops, train_word2vec


def small_vectors(lowercase=True):
    return WordVectors(["the", "bank", "river"], [5, 3, 2],
                       np.arange(12, dtype=np.float32).reshape(3, 4) + 1, lowercase)


def test_out_of_vocabulary_words_get_the_zero_vector():
    v = small_vectors()
    out = v.lookup(["The", "bank", "zebra", "RIVER"])
    assert np.array_equal(out[0], v.vectors[0]) and np.array_equal(out[3], v.vectors[2])
    assert not out[2].any()                                   # OOV
    assert list(v.ids(["zebra", "bank"])) == [v.oov_id, 1]
    assert v.oov_rate([["the", "zebra"], ["bank", "okapi"]]) == 0.5
    cased = small_vectors(lowercase=False)
    assert not cased.lookup(["The"]).any()                    # no folding: "The" is unseen


def test_saved_vectors_load_back_and_gensim_reads_them(tmp_path):
    from gensim.models import KeyedVectors

    v = small_vectors()
    v.save(tmp_path, {"pretrain_static": {"dim": 4}})
    back = WordVectors.load(tmp_path)
    assert back.words == v.words and back.counts == v.counts and back.lowercase
    assert np.array_equal(back.vectors, v.vectors)
    kv = KeyedVectors(vector_size=4)
    kv.add_vectors(back.words, np.load(tmp_path / "vectors.npy"))
    assert np.array_equal(kv["bank"], v.vectors[1])
    (tmp_path / "vocab.tsv").write_text("the\t5\nbank\n")     # corrupt
    with pytest.raises(InputError, match="rerun pretrain_static"):
        WordVectors.load(tmp_path)


class Sentences:
    """Two topics that never share a sentence: words of one topic share contexts."""

    lowercase = True

    def __init__(self, n=400, seed=0):
        rng = random.Random(seed)
        topics = [["river", "water", "boat", "fish"], ["money", "loan", "cash", "bank"]]
        self.sentences = [[rng.choice(t) for _ in range(8)] for t in
                          (topics[rng.randrange(2)] for _ in range(n))]

    def __iter__(self):
        return iter(self.sentences)


def w2v_params(**kw):
    return config.from_dict(config.StaticParams, {
        "dim": 16, "sg": True, "window": 3, "min_count": 1, "negative": 5, "sample": 0.0,
        "lr": 0.025, "epochs": 3, "workers": 1, "seed": 0, **kw}, "pretrain_static")


def test_word2vec_learns_shared_contexts_and_is_deterministic():
    p = w2v_params()
    a, words = train_word2vec(Sentences(), p)
    b, _ = train_word2vec(Sentences(), p)
    assert a.vectors.tobytes() == b.vectors.tobytes() and a.words == b.words
    assert words == 400 * 8 and a.dim == 16 and sorted(a.words) == sorted(
        {w for s in Sentences() for w in s})

    def cos(x, y):
        u, v = a.lookup([x])[0], a.lookup([y])[0]
        return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))
    assert cos("river", "boat") > cos("river", "cash") + 0.2
    c, _ = train_word2vec(Sentences(), w2v_params(seed=1))
    assert c.vectors.tobytes() != a.vectors.tobytes()          # the seed matters
    assert train_flops(p, words) > 0


def test_static_params_are_validated():
    with pytest.raises(config.ParamError) as e:
        w2v_params(dim=0)
    assert e.value.key == "pretrain_static.dim"
    with pytest.raises(config.ParamError):
        w2v_params(window="5")


def test_a_corpus_with_no_frequent_enough_word_is_an_input_error():
    with pytest.raises(InputError, match="min_count=10000"):
        train_word2vec(Sentences(n=10), w2v_params(min_count=10_000))
