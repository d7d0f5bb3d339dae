"""Params: profiles composed into params.yaml (what DVC hashes is what runs), validation errors
that name the key, and profile names that cannot reach a shell or a path outside conf/."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ctxrep import config
from ctxrep.config import composition
from ctxrep.config import ParamError
from tests.conftest import REPO, link_published, scratch_repo


def compose(tmp_path, profile, *overrides):
    return composition.compose(profile, list(overrides), root=REPO, out=tmp_path / "params.yaml")


def test_auto_is_written_resolved_for_this_cpu(tmp_path):
    """`compute.isa: auto` never reaches params.yaml through ctxrep: it is avx2 on an Intel
    CPU and native on any other, and `make repro` passes the same value to DVC."""
    from ctxrep import compute

    composed = compose(tmp_path, "default")
    assert composed["compute"]["isa"] == compute.resolve("auto") != "auto"
    intel = compute.cpu_vendor().startswith("GenuineIntel")
    assert compute.resolve("auto") == ("avx2" if intel and compute.is_x86() else "native")
    assert composition.effective_overrides("default", ["grid.tasks=[ud_pos]"], root=REPO) == [
        "grid.tasks=[ud_pos]", f"compute.isa={compute.resolve('auto')}"]
    assert composition.effective_overrides("default", ["compute.isa=compatible"], root=REPO) == [
        "compute.isa=compatible"]


def test_committed_params_yaml_is_the_default_profile_composed(tmp_path):
    """params.yaml is generated (`dvc exp run -S profile=default`); a hand edit would run values
    that conf/ does not hold."""
    committed = yaml.safe_load((REPO / "params.yaml").read_text())
    # compute.isa: auto is written resolved for the machine that composed it (avx2 on an Intel
    # CPU, native elsewhere): the committed file holds the committing machine's
    isa = committed["compute"]["isa"]
    assert isa in ("avx2", "native") and "isa: auto" in (REPO / "conf/config.yaml").read_text()
    composed = compose(tmp_path, "default", f"compute.isa={isa}")
    assert committed == composed, (
        "params.yaml is not conf/ composed for the default profile: switch back with "
        "`make repro` (or `dvc exp run -S profile=default`), edit conf/ rather than params.yaml")


# The files a folder of published weights must hold (empty stand-ins: only their names are
# checked before a run; test_published.py imports real ones).
PUBLISHED_FILES = {"pretrain_bilm": ["elmo_options.json", "elmo_weights.hdf5"],
                   "pretrain_bert": ["config.json", "model.safetensors", "vocab.txt"]}


@pytest.mark.parametrize("profile", composition.profiles(REPO))
def test_every_profile_composes_to_valid_params(tmp_path, profile, monkeypatch):
    params = compose(tmp_path, profile)
    assert params["profile"] == profile
    monkeypatch.chdir(tmp_path)  # an import's `path` is relative to the repo root
    link_published(tmp_path)     # what `make` unpacks from the package index (import_bert's)
    for section, names in PUBLISHED_FILES.items():
        if params[section]["source"] == "import" and not (tmp_path / params[section]["path"]).exists():
            folder = tmp_path / params[section]["path"]
            folder.mkdir(parents=True)
            for name in names:
                (folder / name).write_bytes(b"")
    config.read_params(tmp_path)  # validates every section


def test_profile_values_and_command_line_overrides(tmp_path):
    default, tiny = compose(tmp_path, "default"), compose(tmp_path, "tiny")
    assert tiny["pretrain_bilm"]["steps"] == 30 != default["pretrain_bilm"]["steps"]
    assert tiny["pretrain_bilm"]["lr"] == default["pretrain_bilm"]["lr"]  # not named: inherited
    # `-S` always wins, over the base and over the profile
    over = compose(tmp_path, "tiny", "pretrain_bilm.steps=40", "transfer.common.seeds=[3,4]")
    assert over["pretrain_bilm"]["steps"] == 40 and over["transfer"]["common"]["seeds"] == [3, 4]
    assert config.load_section("pretrain_bilm", config.read_params(tmp_path)).steps == 40


def test_a_new_top_level_key_is_rejected(tmp_path):
    compose(tmp_path, "tiny", "+foo=1")  # Hydra accepts it; the stages must not
    with pytest.raises(ParamError, match="'foo'.*known top-level key"):
        config.read_params(tmp_path)


def test_a_missing_key_is_an_error_not_a_default(tmp_path):
    params = compose(tmp_path, "default")
    del params["tokenize"]["seed"]
    with pytest.raises(ParamError, match=r"tokenize\.seed.*required"):
        config.load_section("tokenize", params)


def test_yaml_error_names_the_file(tmp_path):
    (tmp_path / "params.yaml").write_text("tokenize:\n  seed: [1\n")
    with pytest.raises(ParamError, match="params.yaml.*valid YAML"):
        config.read_params(tmp_path)


def test_an_unknown_grid_task_stops_before_any_stage(tmp_path):
    compose(tmp_path, "tiny", "grid.tasks=[sst2,sst3]")
    with pytest.raises(ParamError, match="grid.tasks.*'sst3'"):
        config.read_params(tmp_path)


@pytest.mark.parametrize("override, match", [
    # a method under the other approach's key: its cells would run in the wrong stage
    ("grid.feature_based=[static,bert-finetune]", r"grid.feature_based.*'bert-finetune'.*"
                                                  r"belongs in grid.fine_tuned"),
    ("grid.fine_tuned=[elmo]", r"grid.fine_tuned.*'elmo'.*belongs in grid.feature_based"),
    ("grid.fine_tuned=[bert-tuned]", r"grid.fine_tuned.*'bert-tuned'.*fine-tuned methods"),
    # the grid's keys before the split into approaches
    ("+grid.methods=[static]", r"grid.methods.*feature_based.*fine_tuned"),
    ("learning_curve.methods=[static,bert-finetune]", r"learning_curve.methods.*feature-based"),
])
def test_a_method_listed_under_the_wrong_approach_is_refused_naming_the_right_key(
        tmp_path, override, match):
    compose(tmp_path, "default", override)
    with pytest.raises(ParamError, match=match):
        config.read_params(tmp_path)


def test_a_feature_learning_curve_outside_the_extracted_tasks_stops_at_composition(tmp_path):
    """extract featurizes grid.tasks only: a learning curve of a feature-based method on another
    task used to fail after the extract stages, at its first cell (FileNotFoundError)."""
    compose(tmp_path, "default", "grid.tasks=[conll2003]", "learning_curve.tasks=[ud_pos]")
    with pytest.raises(ParamError, match=r"learning_curve.tasks.*'ud_pos'.*grid.tasks"):
        config.read_params(tmp_path)
    compose(tmp_path, "default", "grid.tasks=[conll2003]", "learning_curve.tasks=[conll2003]")
    config.read_params(tmp_path)  # within the grid: fine


def test_a_task_not_fetched_names_the_profile_file(tmp_path):
    """The default profile sets its own `tasks:`: adding a task to conf/config.yaml alone is not
    enough, and the message says where to look."""
    compose(tmp_path, "default", "grid.tasks=[ud_pos,sst5]")
    with pytest.raises(ParamError, match=r"conf/profile/default.yaml"):
        config.read_params(tmp_path)


@pytest.mark.parametrize("overrides,key,expected", [
    ({"num_proc": "2"}, "tokenize.num_proc", "an integer"),
    ({"num_proc": 0}, "tokenize.num_proc", ">= 1"),
    ({"lowercase": 1}, "tokenize.lowercase", "true or false"),
    ({"heldout_fraction": 0.9}, "tokenize.heldout_fraction", "< 0.5"),
    ({"nmu_proc": 2}, "tokenize.nmu_proc", "known keys"),
    ({"min_sentence_words": 20, "max_sentence_words": 10}, "tokenize.min_sentence_words",
     "max_sentence_words"),
])
def test_bad_params_name_key_and_expectation(overrides, key, expected):
    with pytest.raises(ParamError) as e:
        composition.defaults("tokenize", **overrides)
    assert e.value.key == key
    assert expected in str(e.value)


def test_choice_param():
    with pytest.raises(ParamError, match=r"data.source.*'internet'.*\['auto', 'mirror'"):
        composition.defaults("data", source="internet")


@pytest.mark.parametrize("name", ["huge", "tiny; touch pwned", "../../etc/passwd", "Tiny", ""])
def test_profile_names_are_checked_before_any_shell_or_path_sees_them(name):
    with pytest.raises(ParamError, match="profile"):
        composition.check_profile(name, REPO)


def test_model_config_contradictions_are_refused_with_the_params_under_their_key():
    """Refused by the params check (`ctxrep check-params`, the first thing `make repro` does),
    not by the stage after DVC has removed its old outputs."""
    with pytest.raises(ParamError) as e:
        composition.defaults("pretrain_bilm", projection_dim=512, cell_dim=256)
    assert e.value.key == "pretrain_bilm.projection_dim" and "cell_dim" in str(e.value)
    with pytest.raises(ParamError) as e:
        composition.defaults("pretrain_bert", size="custom", hidden_size=30, num_attention_heads=4)
    assert e.value.key == "pretrain_bert.hidden_size" and "num_attention_heads" in str(e.value)


def test_the_params_check_agrees_with_the_model_configs_own_validation():
    """Every architecture the params check lets through builds (and the ones it refuses do not)."""
    from ctxrep.models.bert import BertConfig
    from ctxrep.models.bilm import BiLMConfig

    for hidden, heads in [(32, 4), (30, 4), (64, 3), (48, 3)]:
        try:
            bert = composition.defaults("pretrain_bert", size="custom", hidden_size=hidden,
                                        num_attention_heads=heads, intermediate_size=64)
        except ParamError:
            with pytest.raises(ValueError):
                BertConfig(vocab_size=100, hidden_size=hidden, num_hidden_layers=1,
                           num_attention_heads=heads, intermediate_size=64,
                           max_position_embeddings=64, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, pre_layer_norm=False).validate()
        else:
            BertConfig.from_params(bert, vocab_size=100)
    for projection, cell in [(64, 128), (128, 128), (256, 128)]:
        try:
            bilm = composition.defaults("pretrain_bilm", projection_dim=projection, cell_dim=cell)
        except ParamError:
            continue
        BiLMConfig.from_params(bilm, vocab_size=20000)


def _make_repro(repo, profile: str) -> subprocess.CompletedProcess:
    """`make repro PROFILE=<profile>` in the scratch checkout ``repo`` with DVC replaced by echo:
    what reaches DVC, if anything. ``-o`` keeps make from reinstalling the linked ``.venv``."""
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}
    return subprocess.run(["make", "-s", "-o", ".venv/.installed", "repro", f"PROFILE={profile}",
                           "DVC=echo"], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300)


def test_make_repro_profile_cannot_inject_a_command(tmp_path):
    # A scratch checkout: a run that "succeeds" here must not touch this checkout's dvc.lock.
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        shutil.copy2(REPO / name, repo / name)
    os.symlink(Path(sys.executable).parents[1], repo / ".venv")
    marker = tmp_path / "pwned"
    proc = _make_repro(repo, f"tiny; touch {marker}")
    assert proc.returncode == 2 and not marker.exists()
    assert "expected a name matching" in proc.stderr and "Traceback" not in proc.stderr
    proc = _make_repro(repo, "huge")
    profiles = sorted(f.stem for f in (REPO / "conf/profile").glob("*.yaml"))
    assert proc.returncode == 2 and str(profiles) in proc.stderr
    proc = _make_repro(repo, "tiny")
    assert proc.returncode == 0 and "exp run -S profile=tiny" in proc.stdout


def test_pre_ln_bert_is_refused_before_pretraining_not_at_export():
    # The HF model directory later stages read has no pre-LN BERT; finding out after training
    # would waste the whole pretraining run.
    with pytest.raises(ParamError, match=r"pretrain_bert.pre_layer_norm.*Hugging Face"):
        composition.defaults("pretrain_bert", pre_layer_norm=True)


@pytest.mark.parametrize("path,overrides,key,expected", [
    ("pretrain_bilm", {"steps": 99999999999999999999}, "pretrain_bilm.steps", "<= 100,000,000"),
    ("pretrain_bert", {"batch_size": 10**9}, "pretrain_bert.batch_size", "<= 65,536"),
    ("pretrain_bilm", {"seed": 2**32}, "pretrain_bilm.seed", "<= 4,294,967,295"),
    ("pretrain_bilm", {"filters": [[1, 32], [2, 10**7]]}, "pretrain_bilm.filters", "<= 65,536"),
    ("pretrain_bilm", {"filters": [[0, 32]]}, "pretrain_bilm.filters", ">= 1"),
    ("pretrain_static", {"epochs": 10**6}, "pretrain_static.epochs", "<= 1,000"),
    ("data", {"corpus_max_docs": 10**12}, "data.corpus_max_docs", "<= 1,000,000,000"),
    ("transfer.elmo", {"batch_size": 10**6}, "transfer.elmo.batch_size", "<= 65,536"),
    ("transfer.bert-finetune", {"steps": 10**9}, "transfer.bert-finetune.steps", "<= 100,000,000"),
    ("pretrain_bert", {"size": "custom", "hidden_size": 33, "num_attention_heads": 2},
     "pretrain_bert.hidden_size", "a multiple of num_attention_heads"),
    ("pretrain_bilm", {"filters": []}, "pretrain_bilm.filters", "non-empty list"),
    ("transfer.bert-finetune", {"lr": [1e-4, 2.0]}, "transfer.bert-finetune.lr", "<= 1"),
    ("transfer.bert-finetune", {"lr": []}, "transfer.bert-finetune.lr", "non-empty list"),
    ("transfer.bert-finetune", {"lr": [1e-4, 1e-4]}, "transfer.bert-finetune.lr", "distinct"),
    ("transfer.bert-scratch", {"steps": 10, "eval_every": 20}, "transfer.bert-scratch.eval_every",
     "at most steps"),
    ("transfer.common", {"seeds": [0, 2**33]}, "transfer.common.seeds", "<= 4,294,967,295"),
    ("transfer.common", {"seeds": list(range(101))}, "transfer.common.seeds", "at most 100"),
    ("probe", {"max_train_words": 10**10}, "probe.max_train_words", "<= 1,000,000,000"),
])
def test_absurd_values_are_refused_naming_the_param(path, overrides, key, expected):
    with pytest.raises(ParamError) as e:
        composition.defaults(path, **overrides)
    assert e.value.key == key and expected in str(e.value)


def test_an_absurd_command_line_value_stops_composition_before_any_stage(tmp_path):
    # `dvc exp run -S pretrain_bilm.steps=99999999999999999999` composes; validation refuses it
    compose(tmp_path, "tiny", "pretrain_bilm.steps=99999999999999999999")
    with pytest.raises(ParamError, match=r"pretrain_bilm\.steps.*<= 100,000,000"):
        config.read_params(tmp_path)


def test_a_train_cap_that_leaves_nothing_to_train_on_is_refused_at_composition(tmp_path):
    """`max_train_examples=1`: the one example is carved off as dev. Refused when params are
    validated (`make repro`'s check, the first stage), not by baseline@<task> after fetch and
    extract have run."""
    compose(tmp_path, "tiny", "transfer.common.max_train_examples=1")
    with pytest.raises(ParamError) as e:
        config.read_params(tmp_path)
    assert e.value.key == "transfer.common.max_train_examples"
    assert "at least 2" in str(e.value) and "dev_fraction" in str(e.value)
    # the same rule as the split itself (ctxrep.transfer.selection.train_dev_indices)
    from ctxrep.errors import InputError
    from ctxrep.transfer.selection import train_dev_indices

    for n in range(1, 40):
        for fraction in (0.01, 0.2, 0.49):
            try:
                composition.defaults("transfer.common", max_train_examples=n, dev_fraction=fraction)
                refused = False
            except ParamError:
                refused = True
            try:
                train_dev_indices(n, fraction)
                fails = False
            except InputError:
                fails = True
            assert refused == fails, (n, fraction)
    assert composition.defaults("transfer.common", max_train_examples=0).max_train_examples == 0


def test_make_repro_refuses_a_bad_cap_before_dvc_runs(tmp_path):
    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    (repo / "conf/profile/tiny.yaml").write_text(
        (repo / "conf/profile/tiny.yaml").read_text().replace("max_train_examples: 64",
                                                              "max_train_examples: 1"))
    proc = subprocess.run([sys.executable, "-m", "ctxrep", "check-params", "tiny"], cwd=repo,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "transfer.common.max_train_examples" in proc.stderr and "Traceback" not in proc.stderr


def test_check_params_write_writes_params_yaml_only_when_valid(tmp_path):
    """`ctxrep check-params PROFILE --write`: params.yaml for the profile, so `dvc status` can
    be read before a run; a rejected value leaves params.yaml as it was."""
    import yaml

    (tmp_path / "repo").mkdir()
    repo = scratch_repo(tmp_path / "repo")
    before = (repo / "params.yaml").read_text()

    def check_params(*args):
        return subprocess.run([sys.executable, "-m", "ctxrep", "check-params", *args],
                              cwd=repo, capture_output=True, text=True, timeout=300)

    bad = check_params("tiny", "transfer.common.max_train_examples=1", "--write")
    assert bad.returncode == 2 and (repo / "params.yaml").read_text() == before
    good = check_params("tiny", "pretrain_bert.steps=7", "--write")
    assert good.returncode == 0 and "dvc status" in good.stderr
    written = yaml.safe_load((repo / "params.yaml").read_text())
    assert written["profile"] == "tiny" and written["pretrain_bert"]["steps"] == 7
