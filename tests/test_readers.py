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


def test_raw_sentences_are_tokenized_with_the_corpus_tokenizer_on_request(tmp_path):
    """tokenize=True: ``rains.`` becomes ``rains .``, as the corpus was split (the transfer
    code splits texts on whitespace); the default keeps a pre-tokenized source as it is."""
    path = tmp_path / "train.tsv"
    path.write_text("s1\ts2\tlabel\nIt rains, doesn't it?\tNo.\t1\n")
    raw = next(R.tsv_pair(path, R.ReadStats(), "s1", "s2", "label", ["0", "1"]))
    assert raw["text"] == "It rains, doesn't it?"
    row = next(R.tsv_pair(path, R.ReadStats(), "s1", "s2", "label", ["0", "1"], tokenize=True))
    assert (row["text"], row["text_pair"]) == ("It rains , does n't it ?", "No .")


# --- byte-order mark and CRLF line ends ------------------------------------------------------

BOM = "\ufeff"  # encodes to b"\xef\xbb\xbf" in UTF-8


def _write_bom_crlf(path, text: str) -> None:
    """``text`` (LF line ends) as a UTF-8 file that opens with a BOM and ends lines with CRLF."""
    data = (BOM + text.replace("\n", "\r\n")).encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)


def _write_plain(path, text: str) -> None:
    data = text.encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


_CONLLU = "# c\n1\tI\tI\tPRON\t_\t_\t2\tnsubj\t_\t_\n2\tsee\tsee\tVERB\t_\t_\t0\troot\t_\t_\n\n"
_SQUAD = json.dumps({"data": [{"title": "T", "paragraphs": [{"context": "Denver won in 2016.", "qas": [
    {"id": "q1", "question": "When?", "answers": [{"text": "2016", "answer_start": 14}]}]}]}]}, indent=1)

# name -> (file name, LF text, read(path) -> rows); the first line of each is one the reader parses
FORMATS = {
    "wikiextractor": ("wiki_00.txt.gz", '<doc id="7" url="u" title="Play">\nPlay\nFirst para.\n</doc>\n',
                      lambda p: list(R.wikiextractor_docs([p], R.ReadStats()))),
    "wikitext": ("wiki.train.tokens", " = Play = \n\n A play . \n",
                 lambda p: list(R.wikitext_docs([p], R.ReadStats()))),
    "sst": ("stsa.binary.train", "1 a good film\n0 a bad one\n", lambda p: list(R.sst(p, R.ReadStats(), 2))),
    "conll2003": ("train.txt", "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n",
                  lambda p: list(R.conll2003(p, R.ReadStats()))),
    "conllu": ("x.conllu", _CONLLU.removeprefix("# c\n"), lambda p: list(R.conllu_upos(p, R.ReadStats()))),
    "conllu-comment-first": ("y.conllu", _CONLLU, lambda p: list(R.conllu_upos(p, R.ReadStats()))),
    "sick": ("SICK_train.txt", ("pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
                                "1\tA dog runs.\tA dog moves.\t4.5\tENTAILMENT\n"),
             lambda p: list(R.sick(p, R.ReadStats()))),
    "squad": ("dev-v1.1.json", _SQUAD, lambda p: R.squad_articles(p, R.ReadStats())),
    "tsv_pair": ("train.tsv", "index\tsentence1\tsentence2\tlabel\n0\tA man runs.\tA person moves.\tyes\n",
                 lambda p: list(R.tsv_pair(p, R.ReadStats(), "sentence1", "sentence2", "label",
                                           ["no", "yes"]))),
    "tsv_headerless": ("in_domain_train.tsv", "gj04\t1\t\tOur friends won't buy it.\n",
                       lambda p: list(R.tsv_headerless(p, R.ReadStats(), 4, text=3, label=1,
                                                       labels=["0", "1"]))),
}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_reads_the_same_with_bom_and_crlf(tmp_path, fmt):
    name, text, read = FORMATS[fmt]
    plain, odd = tmp_path / "plain" / name, tmp_path / "odd" / name
    plain.parent.mkdir()
    odd.parent.mkdir()
    _write_plain(plain, text)
    _write_bom_crlf(odd, text)
    expected = read(plain)
    assert expected  # the fixture itself yields rows
    assert read(odd) == expected


def test_wic_reads_bom_and_crlf(tmp_path):
    data, gold = tmp_path / "d.txt", tmp_path / "g.txt"
    _write_bom_crlf(data, "carry\tV\t2-1\tYou must carry your gear .\tSound carries well .\n")
    _write_bom_crlf(gold, "T\n")
    (row,) = R.wic(data, gold, R.ReadStats())
    assert row["word"] == "carry" and row["label"] == 1
    assert row["sentence2"][row["start2"]:row["end2"]] == "carries"


# GLUE MRPC (msr_paraphrase_train.txt / train.tsv): a header row, Quality 1 = paraphrase
MRPC = ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t702876\t702977\tAmrozi accused his brother .\tReferring to him , Amrozi accused his brother .\n"
        "0\t2108705\t2108831\tYucaipa owned Dominick 's .\tYucaipa bought Dominick 's in 1995 .\n")


def test_mrpc_tsv_with_bom_and_crlf_reads_through_tsv_pair(tmp_path):
    path = tmp_path / "msr_paraphrase_train.txt"
    _write_bom_crlf(path, MRPC)
    stats = R.ReadStats()
    rows = list(R.tsv_pair(path, stats, "#1 String", "#2 String", "Quality", ["0", "1"]))
    assert rows == [
        {"text": "Amrozi accused his brother .", "text_pair": "Referring to him , Amrozi accused his brother .",
         "label": 1},
        {"text": "Yucaipa owned Dominick 's .", "text_pair": "Yucaipa bought Dominick 's in 1995 .", "label": 0},
    ]
    assert stats.replaced_lines == 0


def test_header_error_lists_the_columns_found(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(MRPC.replace("Quality", "Qualty", 1))
    with pytest.raises(R.DataError) as err:
        list(R.tsv_pair(path, R.ReadStats(), "#1 String", "#2 String", "Quality", ["0", "1"]))
    assert str(err.value) == (f"{path}:1: header lacks columns ['Quality']; "
                              "found ['Qualty', '#1 ID', '#2 ID', '#1 String', '#2 String']")


def test_header_error_after_bom_names_clean_columns(tmp_path):
    # a BOM left in place would make the first column '\ufeffQuality' and this a confusing error
    path = tmp_path / "train.tsv"
    _write_bom_crlf(path, "Quality\t#1 String\n1\ta\n")
    with pytest.raises(R.DataError, match=r"lacks columns \['#2 String'\]; found \['Quality', '#1 String'\]$"):
        list(R.tsv_pair(path, R.ReadStats(), "#1 String", "#2 String", "Quality", ["0", "1"]))


# GLUE CoLA in_domain_train.tsv: no header; SOURCE, LABEL, ORIGINAL MARK ('*' or empty), SENTENCE
COLA = ("gj04\t1\t\tOur friends won't buy this analysis, let alone the next one we propose.\n"
        "gj04\t0\t*\tThey drank the pub.\n"
        "\n"
        "cj99\t1\t\tThe more you eat, the less you want.\n")


def test_cola_headerless_tsv_with_bom_and_crlf(tmp_path):
    path = tmp_path / "in_domain_train.tsv"
    _write_bom_crlf(path, COLA)
    rows = list(R.tsv_headerless(path, R.ReadStats(), 4, text=3, label=1, labels=["0", "1"]))
    assert rows == [
        {"text": "Our friends won't buy this analysis, let alone the next one we propose.", "label": 1},
        {"text": "They drank the pub.", "label": 0},
        {"text": "The more you eat, the less you want.", "label": 1},
    ]


def test_headerless_tsv_pair_columns_and_errors(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\tyes\nc\td\tno\n")
    rows = list(R.tsv_headerless(path, R.ReadStats(), 3, text=0, text_pair=1, label=2, labels=["no", "yes"]))
    assert rows[0] == {"text": "a", "text_pair": "b", "label": 1}
    path.write_text("gj04\t1\t\tFine.\ngj04\t0\tOnly three.\n")
    with pytest.raises(R.DataError, match=r"pairs.tsv:2: expected 4 tab-separated columns, got 3"):
        list(R.tsv_headerless(path, R.ReadStats(), 4, text=3, label=1, labels=["0", "1"]))
    path.write_text("gj04\t2\t\tOdd label.\n")
    with pytest.raises(R.DataError, match=r"pairs.tsv:1: label '2' \(column 1\) is not one of \['0', '1'\]"):
        list(R.tsv_headerless(path, R.ReadStats(), 4, text=3, label=1, labels=["0", "1"]))
    with pytest.raises(ValueError, match="column indices"):
        list(R.tsv_headerless(path, R.ReadStats(), 4, text=4, label=1, labels=["0", "1"]))


def test_sts_style_score_tsv_reads_floats_with_bom_and_names_a_bad_score(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"\xef\xbb\xbfindex\tgenre\tsentence1\tsentence2\tscore\r\n"
                     b"0\tmain-captions\tA plane takes off.\tAn air plane is taking off.\t5.000\r\n"
                     b"1\tmain-captions\tA man plays.\tA cat sleeps.\t0.250\r\n")
    rows = list(R.tsv_pair_score(path, R.ReadStats(), "sentence1", "sentence2", "score"))
    assert rows == [{"text": "A plane takes off.", "text_pair": "An air plane is taking off.",
                     "label": 5.0},
                    {"text": "A man plays.", "text_pair": "A cat sleeps.", "label": 0.25}]
    path.write_text("sentence1\tsentence2\tscore\na\tb\tfive\n")
    with pytest.raises(R.DataError, match=r"train.tsv:2: score 'five' \(column score\) is not a number"):
        list(R.tsv_pair_score(path, R.ReadStats(), "sentence1", "sentence2", "score"))


# --- skipping malformed rows on an explicit allowance (DatasetSpec.skip_malformed) ------------

_COLA = "gj04\t1\t\tThe sailors rode the breeze.\ngj04\t0\t*\tThe more we eat.\n"


def _cola(path, stats):
    return list(R.tsv_headerless(path, stats, 4, text=3, label=1, labels=["0", "1"]))


def test_a_malformed_row_is_an_error_by_default(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(_COLA + "gj04 1\t\tA space, not a tab.\n")
    with pytest.raises(R.DataError, match=r"train.tsv:3: expected 4 tab-separated columns, got 3"):
        _cola(path, R.ReadStats())


def test_skip_malformed_skips_and_records_each_malformed_row(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(_COLA + "gj04 1\t\tA space, not a tab.\ngj04\t1\t\tLast one.\n")
    stats = R.ReadStats(skip_malformed=1)
    rows = _cola(path, stats)
    assert [r["text"] for r in rows] == ["The sailors rode the breeze.", "The more we eat.",
                                         "Last one."]
    assert stats.skipped == [{"file": str(path), "line": 3,
                              "reason": "expected 4 tab-separated columns, got 3"}]
    # a bad label is skipped the same way; the header-row readers too
    path.write_text(_COLA + "gj04\t7\t\tBad label.\n")
    stats = R.ReadStats(skip_malformed=1)
    assert len(_cola(path, stats)) == 2 and stats.skipped[0]["line"] == 3
    pair = tmp_path / "pair.tsv"
    pair.write_text("s1\ts2\tlabel\nA.\tB.\tyes\nA.\tB. no\nC.\tD.\tmaybe\nE.\tF.\tno\n")
    stats = R.ReadStats(skip_malformed=2)
    rows = list(R.tsv_pair(pair, stats, "s1", "s2", "label", ["yes", "no"]))
    assert [r["label"] for r in rows] == [0, 1]
    assert [(s["line"], s["reason"][:8]) for s in stats.skipped] == \
        [(3, "expected"), (4, "label 'm")]
    score = tmp_path / "score.tsv"
    score.write_text("s1\ts2\tscore\nA.\tB.\t4.5\nA.\tB.\tn/a\n")
    stats = R.ReadStats(skip_malformed=1)
    assert [r["label"] for r in R.tsv_pair_score(score, stats, "s1", "s2", "score")] == [4.5]
    assert stats.skipped[0]["line"] == 3 and "not a number" in stats.skipped[0]["reason"]
    # a header that lacks a column is never skipped
    with pytest.raises(R.DataError, match="header lacks columns"):
        list(R.tsv_pair_score(score, R.ReadStats(skip_malformed=5), "s1", "s2", "similarity"))


def test_more_malformed_rows_than_allowed_is_the_error_naming_the_count(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text(_COLA + "gj04 1\t\tOne.\ngj04\t1\t\tFine.\ngj04 0\t*\tTwo.\n")
    with pytest.raises(R.DataError, match=r"train.tsv:5: expected 4 tab-separated columns, got 3 "
                                          r"\(malformed row 2: more than the 1 that "
                                          r"skip_malformed allows\)"):
        _cola(path, R.ReadStats(skip_malformed=1))


def test_fetch_writes_the_skipped_rows_into_the_manifest(tmp_path, monkeypatch):
    import dataclasses

    from ctxrep.data import registry, sources
    from ctxrep.data import schemas as S

    mirror = tmp_path / "mirror"
    (mirror / "tasks/cola").mkdir(parents=True)
    (mirror / "tasks/cola/train.tsv").write_text(_COLA + "gj04 1\t\tA space, not a tab.\n")
    (mirror / "tasks/cola/dev.tsv").write_text(_COLA)
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    strict = registry.DatasetSpec(
        name="cola", kind="classification", features=S.classification(["0", "1"]),
        mirror=("tasks/cola/train.tsv", "tasks/cola/dev.tsv"),
        read_mirror=lambda paths, stats, opts: {split: _cola(paths[i], stats)
                                                for split, i in (("train", 0), ("validation", 1))})
    with pytest.raises(R.DataError, match="train.tsv:3: expected 4"):
        sources.fetch(strict, "mirror", {}, tmp_path / "strict")
    m = sources.fetch(dataclasses.replace(strict, skip_malformed=1), "mirror", {}, tmp_path / "out")
    assert m["rows"] == {"train": 2, "validation": 2}
    assert m["skipped_rows"] == {"count": 1, "limit": 1, "rows": [
        {"file": "tasks/cola/train.tsv", "line": 3,
         "reason": "expected 4 tab-separated columns, got 3"}]}
    assert json.loads((tmp_path / "out/MANIFEST.json").read_text())["skipped_rows"] == \
        m["skipped_rows"]
    (mirror / "tasks/cola/train.tsv").write_text(_COLA)  # a strict task's manifest has no entry
    assert "skipped_rows" not in sources.fetch(strict, "mirror", {}, tmp_path / "clean")
