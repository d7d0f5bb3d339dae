"""Readers on tiny files in the published formats, and the errors on bad input."""

import gzip
import json

import pytest

from ctxrep.data import readers as R


def test_wikiextractor_strips_title_line_and_keeps_paragraphs(tmp_path):
    from tests.conftest import write_wiki_shard

    path = tmp_path / "wiki_000.txt.gz"
    write_wiki_shard(path, [("7", "Play", ["First para.", "Second para."]), ("8", "B", ["x y z."])])
    docs = list(R.wikiextractor_docs([path], R.ReadStats()))
    assert [d["doc_id"] for d in docs] == ["7", "8"]
    assert docs[0] == {"doc_id": "7", "title": "Play", "text": "First para.\nSecond para."}


def test_truncated_gzip_names_the_file(tmp_path):
    from tests.conftest import write_wiki_shard

    path = tmp_path / "wiki_001.txt.gz"
    write_wiki_shard(path, [(str(i), "T", ["text " * 200]) for i in range(50)])
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(R.DataError, match=r"wiki_001.txt.gz: corrupt or truncated gzip"):
        list(R.wikiextractor_docs([path], R.ReadStats()))


def test_unclosed_doc_is_an_error(tmp_path):
    path = tmp_path / "w.txt.gz"
    with gzip.open(path, "wt") as f:
        f.write('<doc id="1" url="u" title="T">\nT\nbody\n')
    with pytest.raises(R.DataError, match="never closed"):
        list(R.wikiextractor_docs([path], R.ReadStats()))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(R.DataError, match=r"nope.txt: file not found"):
        list(R.sst(tmp_path / "nope.txt", R.ReadStats(), 2))


def test_non_utf8_bytes_are_replaced_and_counted(tmp_path):
    path = tmp_path / "stsa.binary.train"
    path.write_bytes(b"1 caf\xe9 good\n0 fine bad\n1 na\xefve\n")
    stats = R.ReadStats()
    rows = list(R.sst(path, stats, 2))
    assert stats.replaced_lines == 2
    assert rows[0]["text"] == "caf\ufffd good"


def test_sst_label_out_of_range(tmp_path):
    path = tmp_path / "stsa.binary.dev"
    path.write_text("1 good\n7 what\n")
    with pytest.raises(R.DataError, match=r"stsa.binary.dev:2: expected 'LABEL SENTENCE'"):
        list(R.sst(path, R.ReadStats(), 2))


def test_conll2003_reads_sentences_and_names_bad_line(tmp_path):
    path = tmp_path / "train.txt"
    path.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                    "Peter NNP B-NP B-PER\n")
    rows = list(R.conll2003(path, R.ReadStats()))
    assert rows == [{"tokens": ["EU", "rejects"], "tags": [3, 0]}, {"tokens": ["Peter"], "tags": [1]}]
    path.write_text("EU NNP B-NP B-ORG\nrejects VBZ O\n")
    with pytest.raises(R.DataError, match=r"train.txt:2: expected 4 columns"):
        list(R.conll2003(path, R.ReadStats()))
    path.write_text("EU NNP B-NP B-COUNTRY\n")
    with pytest.raises(R.DataError, match=r"train.txt:1: unknown NER tag 'B-COUNTRY'"):
        list(R.conll2003(path, R.ReadStats()))


def test_conllu_skips_multiword_ranges_and_names_bad_line(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text("# c\n1\tI\tI\tPRON\t_\t_\t2\tnsubj\t_\t_\n2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
                    "2\tdo\tdo\tAUX\t_\t_\t0\troot\t_\t_\n3\tn't\tnot\tPART\t_\t_\t2\tadvmod\t_\t_\n\n")
    rows = list(R.conllu_upos(path, R.ReadStats()))
    assert rows[0]["tokens"] == ["I", "do", "n't"]
    assert [R.UPOS_TAGS[t] for t in rows[0]["tags"]] == ["PRON", "AUX", "PART"]
    path.write_text("1\tI\tI\tPRON\n")
    with pytest.raises(R.DataError, match=r"x.conllu:1: expected 10 tab-separated"):
        list(R.conllu_upos(path, R.ReadStats()))


def test_wic_spans_point_at_the_target_tokens(tmp_path):
    data, gold = tmp_path / "d.txt", tmp_path / "g.txt"
    data.write_text("carry\tV\t2-1\tYou must carry your gear .\tSound carries well .\n")
    gold.write_text("T\n")
    (row,) = R.wic(data, gold, R.ReadStats())
    assert row["sentence1"][row["start1"]:row["end1"]] == "carry"
    assert row["sentence2"][row["start2"]:row["end2"]] == "carries"
    assert row["label"] == 1
    data.write_text("carry\tV\t9-1\tYou must carry .\tSound carries .\n")
    with pytest.raises(R.DataError, match=r"d.txt:1: target index 9"):
        list(R.wic(data, gold, R.ReadStats()))


def test_squad_answer_span_mismatch_is_named(tmp_path):
    path = tmp_path / "dev-v1.1.json"
    article = {"title": "T", "paragraphs": [{"context": "Denver won in 2016.", "qas": [
        {"id": "q1", "question": "?", "answers": [{"text": "2016", "answer_start": 3}]}]}]}
    path.write_text(json.dumps({"data": [article]}))
    with pytest.raises(R.DataError, match=r"dev-v1.1.json: question q1: answer '2016' does not occur"):
        R.squad_articles(path, R.ReadStats())


def test_squad_split_is_by_article_and_seeded():
    articles = [[{"id": f"{a}-{q}", "title": str(a)} for q in range(3)] for a in range(10)]
    train, val = R.split_articles(articles, 0.8, seed=1)
    assert {r["title"] for r in train}.isdisjoint({r["title"] for r in val})
    assert (len(train), len(val)) == (24, 6)
    assert R.split_articles(articles, 0.8, seed=1) == (train, val)
    assert R.split_articles(articles, 0.8, seed=2) != (train, val)


def test_glue_style_tsv_pair_reader(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\tA man runs.\tA person moves.\tentailment\n"
                    "1\tIt rains.\tThe sun shines.\tnot_entailment\n")
    rows = list(R.tsv_pair(path, R.ReadStats(), "sentence1", "sentence2", "label",
                           ["entailment", "not_entailment"]))
    assert rows[1] == {"text": "It rains.", "text_pair": "The sun shines.", "label": 1}
    path.write_text("index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n")
    with pytest.raises(R.DataError, match=r"train.tsv:2: label 'maybe'"):
        list(R.tsv_pair(path, R.ReadStats(), "sentence1", "sentence2", "label", ["yes", "no"]))
