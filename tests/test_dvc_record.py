"""What DVC records is what ran: dvc.yaml against the code and against a real run.

- code deps: every source file a stage's code imports is one of its deps (derived statically);
- params deps: each stage lists exactly the params.yaml keys it read in a real tiny run;
- file deps: every project file a stage opened for reading is a dep (or its own output);
- outs: every file the pipeline leaves in the workspace is a declared output;
- the run cache gives back a whole run: lr a → b → a ends with run a's bytes, metrics included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ctxrep import config
from ctxrep.training.curves import is_point
from tests.conftest import NO_MLFLOW, REPO, copy_run, scratch_repo, tree_hash
from tests.pipeline_deps import code_dep_problems, code_deps, covered

# Files in the workspace that no stage declares: the project itself, DVC's and git's own,
# MLflow, and the wall times (they differ run to run, so DVC must not record them; no stage
# reads them).
NOT_STAGE_FILES = ("conf/", "stages/", "src/", ".dvc/", ".git/", "dvc.yaml", "dvc.lock",
                   "params.yaml", ".dvcignore", ".gitignore", "mlflow.db", "mlartifacts/",
                   "reports/timings/")
# Files a stage opens that are not its inputs: code (checked statically) and tools' state.
TOOL_FILES = (".dvc/", ".git/", "src/", "stages/", "mlflow.db", "mlartifacts/", ".dvcignore",
              "dvc.yaml", "dvc.lock")


def test_code_deps_match_the_imports():
    assert code_dep_problems(REPO) == []


def test_a_new_import_changes_the_manifest_of_exactly_the_scripts_that_run_it(tmp_path):
    """A stage's code dep is its script's manifest (ctxrep.codedeps): an import added to a
    stage script, or a lazy one inside a library function, enters the manifests of exactly the
    scripts that reach it, so DVC reruns those stages and no other."""
    from ctxrep import codedeps

    shutil.copy2(REPO / "dvc.yaml", tmp_path / "dvc.yaml")
    shutil.copytree(REPO / "stages", tmp_path / "stages")
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    scripts = sorted((tmp_path / "stages").glob("*.py"))
    before = {s.stem: codedeps.manifest(s, tmp_path) for s in scripts}
    assert "src/ctxrep/neighbors.py" not in before["probe"]
    probe = tmp_path / "stages/probe.py"
    probe.write_text(probe.read_text() + "\nfrom ctxrep import neighbors  # noqa\n")
    feats = tmp_path / "src/ctxrep/transfer/features.py"
    feats.write_text(feats.read_text() + "\n\ndef _late():\n    import ctxrep.report.plots\n")
    after = {s.stem: codedeps.manifest(s, tmp_path) for s in scripts}
    assert "src/ctxrep/neighbors.py" in after["probe"]
    changed = sorted(name for name in before if before[name] != after[name])
    reach_features = sorted(name for name in before if "src/ctxrep/transfer/features.py" in before[name])
    assert changed == sorted({"probe", *reach_features})
    assert all("src/ctxrep/report/plots.py" in after[name] for name in reach_features)
    assert "report" not in changed or "src/ctxrep/transfer/features.py" in before["report"]
    assert code_dep_problems(tmp_path) == []  # dvc.yaml itself needs no edit


def test_the_code_stage_writes_one_manifest_per_script_and_its_bytes_are_stable(tmp_path):
    from ctxrep import codedeps

    out = tmp_path / "code"
    written = codedeps.write_manifests(out, REPO)
    assert [p.stem for p in written] == sorted(p.stem for p in (REPO / "stages").glob("*.py"))
    first = {p.name: p.read_bytes() for p in written}
    codedeps.write_manifests(out, REPO)  # a second run replaces the folder with the same bytes
    assert {p.name: p.read_bytes() for p in sorted(out.glob("*.json"))} == first
    bilm = json.loads((out / "pretrain_bilm.json").read_text())
    assert "src/ctxrep/launch.py" in bilm and "stages/pretrain_bilm.py" in bilm
    assert not [p for p in bilm if codedeps.is_task_module(p)]  # listed per stage in dvc.yaml


def test_a_stage_whose_code_changed_after_its_manifest_refuses_to_run(tmp_path, monkeypatch):
    """`dvc repro --single-item <stage>` skips the stage `code`: a stage must then refuse to run
    code other than what its manifest (which DVC records) says, naming the file."""
    from ctxrep import codedeps
    from ctxrep.errors import InputError
    from ctxrep.lockfile import verify_stage_inputs

    repo = scratch_repo(tmp_path, "tiny", copy_src=True)
    codedeps.write_manifests(repo / codedeps.CODE_DIR, repo)
    monkeypatch.setenv("DVC_STAGE", "baseline@sst2")
    assert codedeps.changed_since(repo / "data/code/baseline.json", repo) == []
    verify_stage_inputs("baseline@sst2", repo)  # the manifest describes the code: no error
    edited = repo / "src/ctxrep/transfer/baseline_cell.py"
    edited.write_text(edited.read_text() + "\n# an edit after `code` ran\n")
    assert codedeps.changed_since(repo / "data/code/baseline.json", repo) == [
        "src/ctxrep/transfer/baseline_cell.py"]
    with pytest.raises(InputError, match=r"baseline@sst2: its code changed since stage `code` "
                                         r"wrote data/code/baseline.json \(src/ctxrep/transfer/"
                                         r"baseline_cell.py\)"):
        verify_stage_inputs("baseline@sst2", repo)
    assert codedeps.changed_since(repo / "data/code/fetch_task.json", repo) == []  # not its code


def test_no_stage_runs_the_verify_commands_repair_code():
    """Issue 49: a stage checks its inputs with ctxrep.lockfile; `ctxrep verify`'s command and
    repair code (ctxrep.verify) run in no stage, so editing them leaves every stage up to
    date."""
    runs_it = sorted(name for name, deps in code_deps(REPO).items()
                     if "src/ctxrep/verify.py" in deps["needed"])
    assert runs_it == []
    assert all("src/ctxrep/lockfile.py" in deps["needed"] for deps in code_deps(REPO).values())


# The two transfer approaches (BERT §5.3), each a stage of its own: the code only one of them runs.
FINE_TUNING_CODE = ("src/ctxrep/transfer/finetune.py", "stages/finetune.py")
FEATURE_BASED_CODE = ("src/ctxrep/transfer/feature_train.py", "src/ctxrep/transfer/features.py",
                      "src/ctxrep/models/word_vectors.py", "stages/transfer.py")
FEATURE_BASED_STAGES = ("transfer", "learning_curve", "extract", "baseline", "probe")


def test_editing_fine_tuning_code_reruns_no_feature_based_cell():
    """Issue 49: a feature-based cell (stage transfer, its learning curves, the features and
    baselines it reads) does not depend on the fine-tuning code, nor a fine-tuned cell (stage
    finetune) on the feature-based code: DVC reruns a stage when a file its deps cover changes,
    so editing one approach's module leaves the other's cells up to date."""
    deps = code_deps(REPO)
    for name in FEATURE_BASED_STAGES:
        assert [f for f in FINE_TUNING_CODE if covered(f, deps[name]["declared"])] == [], name
    assert [f for f in FEATURE_BASED_CODE if covered(f, deps["finetune"]["declared"])] == []
    # and each runs its own: the check above is not vacuous
    assert covered("src/ctxrep/transfer/finetune.py", deps["finetune"]["declared"])
    assert covered("src/ctxrep/transfer/feature_train.py", deps["transfer"]["declared"])


def test_the_cpp_source_of_a_compiled_kernel_is_a_dep_of_every_stage_that_runs_it(tmp_path):
    # ctxrep.models.lstmp_cpu compiles lstmp_cpu.cpp at run time: editing the C++ changes what
    # pretrain_bilm computes, so DVC must see it.
    from ctxrep import codedeps

    assert "src/ctxrep/models/lstmp_cpu.cpp" in codedeps.script_files(
        REPO / "stages/pretrain_bilm.py", REPO)
    shutil.copytree(REPO / "stages", tmp_path / "stages")
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    (tmp_path / "src/ctxrep/neighbors.cpp").write_text("// a kernel beside a module\n")
    assert "src/ctxrep/neighbors.cpp" in codedeps.script_files(tmp_path / "stages/neighbors.py",
                                                              tmp_path)


def test_every_declared_param_exists_in_params_yaml():
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for name, body in _stages(REPO).items():
        for key in _declared_params(body):
            node = params
            for part in key.split("."):
                assert isinstance(node, dict) and part in node, f"{name}: params.yaml has no {key}"
                node = node[part]


# --------------------------------------------------------------------------------------------
# a real run of the tiny pipeline, traced


def _dvc(repo: Path, *args: str, env: dict | None = None, check: bool = True,
         stdout_only: bool = False) -> str:
    full = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
            "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}", **(env or {})}
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "dvc"), *args],
                          cwd=repo, env=full, capture_output=True, text=True, timeout=1800)
    if check:
        assert proc.returncode == 0, f"dvc {' '.join(args)}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout if stdout_only else proc.stdout + proc.stderr


@pytest.fixture
def run(tiny_run):
    """The session's tiny run (tests/conftest.py, ``tiny_run``): read it, or copy it first."""
    return tiny_run.repo, tiny_run.trace, tiny_run.env


def _stages(repo: Path) -> dict:
    """Expanded stage name (``transfer@sst2-elmo``) → its resolved params, deps and outs."""
    from dvc.repo import Repo

    from dvc.dependency.param import ParamsDependency

    with Repo(str(repo)) as dvc_repo:
        out = {}
        for stage in dvc_repo.index.stages:
            params = [d for d in stage.deps if isinstance(d, ParamsDependency)]
            out[stage.name] = {
                "params": [(d.def_path, list(d.params)) for d in params],
                "deps": [d.def_path for d in stage.deps if d not in params],
                "outs": [o.def_path for o in stage.outs],
            }
    return out


def _declared_params(body: dict) -> set[str]:
    return {key for _, keys in body["params"] for key in keys}


@pytest.mark.slow
def test_each_stage_declares_exactly_the_params_it_read(run):
    repo, trace, _ = run
    stages = _stages(repo)
    seen = 0
    for name, body in stages.items():
        path = trace / f"{name}.json"
        assert path.exists(), f"{name} ran but left no params trace"
        read = set(json.loads(path.read_text()))
        declared = _declared_params(body)
        missing = {k for k in read if not covered(k.replace(".", "/"), {d.replace(".", "/")
                                                                          for d in declared})}
        unused = {d for d in declared
                  if not any(covered(k.replace(".", "/"), {d.replace(".", "/")}) for k in read)}
        assert not missing, f"{name} reads params its dvc.yaml entry does not list: {missing}"
        assert not unused, f"{name} lists params it never reads: {unused}"
        seen += 1
    assert seen >= 30  # every stage of the tiny grid ran and was checked


def undeclared_reads(trace: Path, stage: str, allowed: set[str]) -> list[str]:
    """The files ``stage`` read that its deps and outs do not cover (code aside, which its
    manifest covers), and the task and left-to-right family modules it ran (imported by name,
    in no manifest: dvc.yaml lists each per stage) that they do not."""
    files = json.loads((trace / f"{stage}.files.json").read_text())
    ran = json.loads((trace / f"{stage}.modules.json").read_text())
    modules = [f"src/{name.replace('.', '/')}.py" for name in ran]
    return sorted({*[f for f in files if not f.startswith(TOOL_FILES)
                     and not f.endswith(".gitignore") and not covered(f, allowed)],
                   *[m for m in modules if not covered(m, allowed)]})


@pytest.mark.slow
def test_each_stage_declares_the_files_it_read(run):
    repo, trace, _ = run
    for name, body in _stages(repo).items():
        path = trace / f"{name}.files.json"
        assert path.exists(), f"{name} ran but left no trace of the files it read"
        allowed = set(body["deps"]) | set(body["outs"]) | {"params.yaml"}
        # DVC's, git's and MLflow's own files aside
        assert undeclared_reads(trace, name, allowed) == [], name


@pytest.mark.slow
def test_every_file_the_pipeline_wrote_is_a_declared_output(run):
    repo, _, _ = run
    outs = {o for body in _stages(repo).values() for o in body["outs"]}
    stray = []
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if path.is_dir() or rel.startswith(NOT_STAGE_FILES) or path.name == ".gitignore":
            continue
        if not covered(rel, outs):
            stray.append(rel)
    assert stray == [], f"files written by no declared output: {stray}"
    assert not list((repo / "data/checkpoints").rglob("*.*")), "checkpoints left after success"


@pytest.mark.slow
def test_a_second_run_with_the_same_params_runs_nothing(run, tmp_path):
    repo, _, env = run
    repo = copy_run(repo, tmp_path / "repo")
    out = _dvc(repo, "exp", "run", "-S", "profile=tiny", env={**env, **NO_MLFLOW})
    ran = [line for line in out.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'locate_data':"], out  # it always looks; nothing else runs


@pytest.mark.slow
def test_run_cache_a_b_a_gives_back_run_a_byte_for_byte(run, tmp_path):
    """lr a → b → a on pretrain_bilm: the third run is restored from the run cache, and every
    output, its metrics, curve and compute-ledger entry included, is run a's."""
    repo, _, env = run
    repo = copy_run(repo, tmp_path / "repo")
    files = ["data/models/bilm", "metrics/pretrain_bilm.json", "dvclive/pretrain_bilm",
             "reports/compute/pretrain_bilm.json"]

    def snapshot():
        return {f: tree_hash(repo / f) if (repo / f).is_dir() else (repo / f).read_bytes()
                for f in files}

    lr = yaml.safe_load((repo / "params.yaml").read_text())["pretrain_bilm"]["lr"]
    env = {**env, **NO_MLFLOW}
    a = snapshot()
    _dvc(repo, "exp", "run", "-S", "profile=tiny", "-S", f"pretrain_bilm.lr={lr * 5}",
         "pretrain_bilm", env=env)
    b = snapshot()
    # the ledger counts tokens, parameters and FLOPs, which lr does not change
    assert all(a[f] != b[f] for f in files if "compute" not in f), "lr did not change the outputs"
    out = _dvc(repo, "exp", "run", "-S", "profile=tiny", "pretrain_bilm", env=env)
    assert "Running stage 'pretrain_bilm'" not in out and "cached" in out.lower(), out
    assert snapshot() == a


@pytest.mark.slow
def test_dvc_metrics_are_deterministic_and_narrow(run):
    """Only numbers that the same params and seeds reproduce are DVC metrics (no timings), and
    few enough for `dvc exp show` to stay readable."""
    repo, _, _ = run
    shown = json.loads(_dvc(repo, "metrics", "show", "--json"))
    columns = {}
    for rev in shown.values():
        for path, entry in rev.get("data", {}).items():
            for key, value in _flatten(entry.get("data", {})).items():
                columns[f"{path}:{key}"] = value
    assert columns, "no metrics"
    timing = [c for c in columns if any(w in c for w in ("second", "per_s", "wall", "time"))]
    assert timing == []
    assert all(isinstance(v, (int, float)) for v in columns.values()), "non-numeric metrics"
    # Two files: the headlines (scores, verdict counts, pretraining) and each claim's Δ and CI;
    # statistics (token counts, FLOPs, ...) are plain outputs. Together they fit one screen.
    assert {c.split(":")[0] for c in columns} == {"metrics/headline.json", "metrics/claims.json"}
    claims = {c: v for c, v in columns.items() if c.startswith("metrics/claims.json:")}
    assert claims and {c.rsplit(".", 1)[1] for c in claims} == {"delta", "low", "high"}
    assert {"metrics/headline.json:claims.reproduced",
            "metrics/headline.json:pretrain.bilm.val_ppl"} <= set(columns)
    # what `make exp-show` shows: the headlines and each claim's Δ (its CI bounds dropped)
    shown = [c for c in columns if not c.endswith((".low", ".high"))]
    assert len(shown) <= 40, sorted(shown)


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.slow
def test_a_rejected_value_stops_before_any_output_is_lost(run, tmp_path):
    """Every stage validates every key of params.yaml, and locate_data (cheap) runs first: a
    rejected value stops the pipeline before DVC has removed any costly output."""
    repo, _, env = run
    repo = copy_run(repo, tmp_path / "repo")
    model = tree_hash(repo / "data/models/bilm")
    out = _dvc(repo, "exp", "run", "-S", "profile=tiny", "-S", "pretrain_bert.lr=-1", env=env,
               check=False)
    assert "pretrain_bert.lr" in out and ">" in out, out
    assert "Running stage 'pretrain_bert'" not in out
    assert tree_hash(repo / "data/models/bilm") == model
    assert (repo / "data/models/bert/model.safetensors").exists()


# --------------------------------------------------------------------------------------------
# the same run, as MLflow recorded it (tests/test_mlflow_runs.py has the cheap unit tests)


def _mlflow_pipeline_run(repo: Path):
    """(client, the pipeline run of the fixture's full `dvc exp run`, its stage runs). Other
    tests here add pipeline runs that stop before `report`: the full one is the one with it."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{repo / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ctxrep").experiment_id
    (report,) = client.search_runs([exp], "tags.stage = 'report'")
    parent = client.get_run(report.data.tags["mlflow.parentRunId"])
    stages = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'",
                                max_results=1000)
    return client, parent, stages


@pytest.mark.slow
def test_mlflow_has_one_parent_run_per_pipeline_run_with_the_headline_numbers(run):
    repo, _, _ = run
    client, parent, stages = _mlflow_pipeline_run(repo)
    assert sorted(r.info.run_name for r in stages) == sorted(_stages(repo))  # each once, all nested
    assert {r.data.tags["pipeline_key"] for r in stages} == {parent.data.tags["pipeline_key"]}
    tags = parent.data.tags
    assert tags["run_kind"] == "pipeline" and tags["pipeline_key_source"] == "dvc"
    assert tags["dvc_exp_name"] and parent.info.run_name == tags["dvc_exp_name"]
    assert {r.data.tags["dvc_exp_name"] for r in stages} == {tags["dvc_exp_name"]}
    assert len(tags["git_commit"]) == 40 and parent.data.params["profile"] == "tiny"
    assert parent.data.params["pretrain_bilm.lr"] == str(
        yaml.safe_load((repo / "params.yaml").read_text())["pretrain_bilm"]["lr"])
    metrics = parent.data.metrics
    summary = json.loads((repo / "metrics/summary.json").read_text())
    for task, cells in summary["cells"].items():
        for method, cell in cells.items():
            assert metrics[f"{task}.{method}.mean"] == pytest.approx(cell["mean"])
            assert metrics[f"{task}.{method}.std"] == pytest.approx(cell["std"])
            if cell["ci95"]:
                assert metrics[f"{task}.{method}.ci95_low"] == pytest.approx(cell["ci95"][0])
    bilm = json.loads((repo / "metrics/pretrain_bilm.json").read_text())
    assert metrics["pretrain_bilm.val_ppl"] == pytest.approx(bilm["val_ppl"])
    logged = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/report.md", "report/dvc.lock", "report/figures", "report/summary.json"} <= logged


@pytest.mark.slow
def test_mlflow_transfer_cells_have_one_nested_run_per_seed_and_their_params(run):
    repo, _, _ = run
    client, _, stages = _mlflow_pipeline_run(repo)
    cells = [r for r in stages if r.info.run_name.startswith(("transfer@", "finetune@"))]
    checked = 0
    for cell in cells:
        task, method = cell.info.run_name.split("@", 1)[1].split("-", 1)
        record = json.loads((repo / f"metrics/transfer/{task}/{method}.json").read_text())
        assert cell.data.params["method"] == method and cell.data.params["task"] == task
        assert cell.data.params["transfer.common.seeds"] == str(record["seeds"])
        assert any(k.startswith(f"transfer.{method}.") for k in cell.data.params)
        if "unavailable" in record:
            continue
        seeds = client.search_runs([cell.info.experiment_id],
                                   f"tags.`mlflow.parentRunId` = '{cell.info.run_id}'")
        by_seed = {int(r.data.params["seed"]): r for r in seeds}
        assert sorted(by_seed) == sorted(record["seeds"]) and len(seeds) == len(record["seeds"])
        primary = record["primary"]
        for i, (seed, value) in enumerate(zip(record["seeds"],
                                               record["scores"][primary]["values"])):
            assert by_seed[seed].data.metrics[f"eval_{primary}"] == pytest.approx(value)
            curves = by_seed[seed].info.run_id
            if i == 0 and record.get("lr_search"):  # a rate grid: one nested run per rate tried
                trials = client.search_runs([cell.info.experiment_id],
                                            f"tags.`mlflow.parentRunId` = '{curves}'")
                assert sorted(float(r.data.params["lr"]) for r in trials) == sorted(
                    float(rate) for rate in record["lr_search"])
                curves = next(r.info.run_id for r in trials
                              if float(r.data.params["lr"]) == record["lr"][0])
            assert client.get_metric_history(curves, "train_loss")
        assert cell.data.metrics[f"eval_{primary}_mean"] == pytest.approx(
            record["scores"][primary]["mean"])
        checked += 1
    assert checked >= 3


@pytest.mark.slow
def test_mlflow_registry_holds_both_models_tagged_with_their_dvc_hash(run, monkeypatch):
    import mlflow
    import torch
    from transformers import AutoTokenizer, BertForPreTraining

    repo, _, _ = run
    client, _, stages = _mlflow_pipeline_run(repo)
    lock = yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    for name, stage, path in (("ctxrep-bert", "pretrain_bert", "data/models/bert"),
                              ("ctxrep-bilm", "pretrain_bilm", "data/models/bilm")):
        stage_run = next(r for r in stages if r.info.run_name == stage)
        (version,) = client.search_model_versions(
            f"name = '{name}' and run_id = '{stage_run.info.run_id}'")
        (out,) = [o for o in lock[stage]["outs"] if o["path"] == path]
        assert version.tags["dvc_md5"] == out["md5"], name
        assert version.tags["git_commit"] == stage_run.data.tags["git_commit"]
    bert = next(r for r in stages if r.info.run_name == "pretrain_bert")
    (version,) = client.search_model_versions(f"name = 'ctxrep-bert' and run_id = '{bert.info.run_id}'")
    # mlflow.set_tracking_uri also sets MLFLOW_TRACKING_URI, which every later subprocess of
    # this worker would inherit: cleared after the load, the variable restored by monkeypatch
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{repo / 'mlflow.db'}")
    mlflow.set_tracking_uri(f"sqlite:///{repo / 'mlflow.db'}")
    try:
        logged = mlflow.transformers.load_model(f"models:/ctxrep-bert/{version.version}",
                                                return_type="components")
    finally:
        mlflow.set_tracking_uri(None)
    ours = BertForPreTraining.from_pretrained(str(repo / "data/models/bert")).eval()
    enc = AutoTokenizer.from_pretrained(str(repo / "data/models/bert"))(
        ["the river bank"], ["plays music"], return_tensors="pt")
    with torch.no_grad():
        a, b = logged["model"].eval()(**enc), ours(**enc)
    # registered as a masked LM (fill-mask predicts); the NSP head stays in the DVC output
    assert type(logged["model"]).__name__ == "BertForMaskedLM"
    assert torch.equal(a.logits, b.prediction_logits)


@pytest.mark.slow
def test_plots_diff_of_two_experiments_lists_every_curve_and_figure(run, tmp_path):
    """`dvc plots diff --json <exp-a> <exp-b>` (offline): every top-level chart, with both runs'
    points (pretraining per step with its held-out evaluations, transfer per task, method, seed
    and epoch), and the report's figures as PNG images; the transfer chart holds the cell
    records' curves."""
    repo, _, env = run
    repo = copy_run(repo, tmp_path / "repo")   # the experiments leave the shared run as it was
    env = {**env, **NO_MLFLOW}
    params = yaml.safe_load((repo / "params.yaml").read_text())
    lr = params["pretrain_bilm"]["lr"]
    _dvc(repo, "exp", "run", "-n", "plots-a", "-S", "profile=tiny", "pretrain_bilm", env=env)
    _dvc(repo, "exp", "run", "-n", "plots-b", "-S", "profile=tiny",
         "-S", f"pretrain_bilm.lr={lr * 5}", "pretrain_bilm", env=env)  # the run cache's, if run
    shown = json.loads(_dvc(repo, "plots", "diff", "--json", "-o", str(tmp_path / "plots"),
                            "plots-a", "plots-b", stdout_only=True))
    assert not shown.get("errors"), shown.get("errors")
    plots = shown["data"]

    def points(plot_id: str) -> dict:
        (entry,) = plots[plot_id]
        assert entry["type"] == "vega" and sorted(entry["revisions"]) == ["plots-a", "plots-b"]
        by_rev: dict = {}
        for row in entry["content"]["data"]["values"]:
            by_rev.setdefault(row["rev"], []).append(row)
        return by_rev

    steps = params["pretrain_bilm"]["steps"]
    every = params["pretrain_bilm"]["eval_every"]
    bilm = points("pretrain_bilm")  # one chart: the training loss and the held-out points

    def rows(by_rev: dict, rev: str, name: str) -> list[dict]:
        return [r for r in by_rev[rev] if r["filename"].endswith(name)]

    val_a, val_b = (rows(bilm, rev, "val/ppl.tsv") for rev in ("plots-a", "plots-b"))
    assert [int(r["step"]) for r in val_a] == list(range(every, steps + 1, every))
    assert [r["ppl"] for r in val_a] != [r["ppl"] for r in val_b]
    every_log = params["pretrain_bilm"]["log_every"]
    assert len(rows(bilm, "plots-b", "train/loss.tsv")) == len(
        [s for s in range(1, steps + 1) if is_point(s, every_log, steps)])
    assert rows(points("pretrain_bert"), "plots-a", "val/mlm_acc.tsv")[-1]["mlm_acc"]
    # every cell of the grid, from the report's one table, equal to the cells' records
    transfer = points("reports/transfer_curves.tsv")["plots-a"]
    for task in params["grid"]["tasks"]:
        for method in config.grid_methods(params["grid"]):
            record = json.loads((repo / f"metrics/transfer/{task}/{method}.json").read_text())
            for seed, curve in zip(record["seeds"], record["curves"]):
                drawn = [float(r["dev"]) for r in transfer if (r["task"], r["method"],
                                                             str(r["seed"])) == (task, method, str(seed))]
                assert drawn == pytest.approx(curve["dev"]), (task, method, seed)
    images = [p for p in plots if p.startswith("reports/figures/")]
    assert {"reports/figures/pretraining_loss.png", "reports/figures/transfer_curves.png"} \
        <= set(images)
    for image in images:
        urls = {e["revisions"][0]: e["url"] for e in plots[image]}
        assert set(urls) == {"plots-a", "plots-b"}
        assert all(Path(u).read_bytes()[:4] == b"\x89PNG" for u in urls.values()), image


@pytest.mark.slow
def test_published_weights_run_through_the_same_pipeline(run, tmp_path):
    """`-S pretrain_*.source=import -S pretrain_*.path=…`: the bilm-tf fixture ELMo and a
    `transformers`-saved BERT with a vocabulary of its own replace the trained models; DVC
    tracks their files, extract, a feature cell, a fine-tuning cell and the neighbours run on them
    unchanged, and the report names the files with their sha256. (A copy of the tiny run: only
    what the imports change reruns.)"""
    import torch

    from ctxrep.io import sha256_file
    from ctxrep.models.elmo import Elmo
    from tests.conftest import run_stage
    from tests.test_published import ELMO_FIXTURE, VOCAB, save_tiny_hf_bert

    if not ELMO_FIXTURE.is_dir():
        pytest.skip(f"fixture folder {ELMO_FIXTURE} is absent")
    repo, _, env = run
    env = {**env, **NO_MLFLOW}
    copy = copy_run(repo, tmp_path / "repo")
    bert = save_tiny_hf_bert(tmp_path / "tiny-bert")
    out = _dvc(copy, "exp", "run", "-S", "profile=tiny",
               "-S", "pretrain_bilm.source=import", "-S", f"pretrain_bilm.path={ELMO_FIXTURE}",
               "-S", "pretrain_bert.source=import", "-S", f"pretrain_bert.path={bert}",
               "-S", "transfer.bert-finetune.lr=[0.003]",  # one rate of two: half the cost
               "transfer@ud_pos-elmo", "finetune@ud_pos-bert-finetune", "neighbors", env=env)
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert {"pretrain_bilm", "pretrain_bert", "extract@bilm", "extract@bert",
            "transfer@ud_pos-elmo", "finetune@ud_pos-bert-finetune", "neighbors"} <= ran, out
    assert not {"tokenize", "fetch_corpus"} & ran, out

    # DVC tracks the published files themselves
    lock = yaml.safe_load((copy / "dvc.lock").read_text())["stages"]
    assert [d["path"] for d in lock["pretrain_bilm"]["deps"]].count(str(ELMO_FIXTURE)) == 1
    assert [d["path"] for d in lock["pretrain_bert"]["deps"]].count(str(bert)) == 1
    # the model directories are the published models: ELMo's layers, BERT's own vocabulary
    sentences = json.loads((ELMO_FIXTURE / "sentences.json").read_text())[0][:4]
    imported = Elmo.from_pretrained(copy / "data/models/bilm")([s.split() for s in sentences])
    reference = Elmo.from_pretrained((ELMO_FIXTURE / "options.json",
                                      ELMO_FIXTURE / "lm_weights.hdf5"))([s.split() for s in sentences])
    assert torch.equal(imported.layers, reference.layers)
    vocab = json.loads((copy / "data/models/bert/tokenizer.json").read_text())["model"]["vocab"]
    assert sorted(vocab, key=vocab.get) == VOCAB
    for method in ("elmo", "bert-finetune"):
        cell = json.loads((copy / f"metrics/transfer/ud_pos/{method}.json").read_text())
        assert len(cell["seeds"]) == 2, cell
    assert "Token-layer neighbours" in (copy / "reports/neighbors.md").read_text()

    # the report says which weights were used and where they came from
    run_stage(copy, "report.py", env=env)
    report = (copy / "reports/report.md").read_text()
    assert f"- biLM: **published weights**, imported from `{ELMO_FIXTURE}`:" in report
    assert f"sha256 `{sha256_file(ELMO_FIXTURE / 'lm_weights.hdf5')}`" in report
    assert f"- BERT: **published weights**, imported from `{bert}`:" in report
    assert "## Weights" in report


def assert_declared_exactly(copy: Path, trace: Path, ran: set[str]) -> None:
    """In a copy of the tiny run where stages ``ran`` with the params trace on (``trace``): every
    file in it is some stage's declared output, and each of ``ran`` read exactly the params its
    dvc.yaml entry declares and no file outside its deps and outs."""
    stages = _stages(copy)
    outs = {o for body in stages.values() for o in body["outs"]}
    stray = [rel for path in sorted(copy.rglob("*"))
             if not path.is_dir() and path.name != ".gitignore"
             and not (rel := path.relative_to(copy).as_posix()).startswith(NOT_STAGE_FILES)
             and not covered(rel, outs)]
    assert stray == [], f"files written by no declared output: {stray}"
    for name in ran:
        declared = {d.replace(".", "/") for d in _declared_params(stages[name])}
        read = {k.replace(".", "/") for k in json.loads((trace / f"{name}.json").read_text())}
        assert {k for k in read if not covered(k, declared)} == set(), name
        assert {d for d in declared if not any(covered(k, {d}) for k in read)} == set(), name
        allowed = set(stages[name]["deps"]) | set(stages[name]["outs"]) | {"params.yaml"}
        assert undeclared_reads(trace, name, allowed) == [], name


@pytest.mark.slow
def test_the_left_to_right_lm_runs_in_its_own_stages_and_is_judged_beside_bert(run, tmp_path):
    """`-S left_to_right=[gpt_bpe]` on a finished tiny run adds BERT's Table 5 ablation and
    reruns nothing else but the report: the causal LM's pretraining (with the family's own
    byte-level BPE, learned from the corpus: the left-to-right path with a family's tokenizer,
    the WordPiece path being BERT's own), features and two cells per task, every file they
    write, every param and file they read and every family module they ran declared, its
    checkpoint a Hugging Face BERT decoder with its tokenizer, and both claims judged on both
    tasks; then a change of its steps alone (a budget's) leaves every other stage up to date."""
    from transformers import AutoTokenizer

    from ctxrep.analysis.claims import CLAIMS

    family = "gpt_bpe"
    repo, _, env = run
    copy, trace = copy_run(repo, tmp_path / "repo"), tmp_path / "trace"
    # one fine-tuning rate of the tiny profile's two: a cell is a cell, and the cost halves
    out = _dvc(copy, "exp", "run", "-S", "profile=tiny", "-S", f"left_to_right=[{family}]",
               "-S", f"transfer.{family}-finetune.lr=[0.003]",
               env={**env, **NO_MLFLOW, config.TRACE_ENV: str(trace)})
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    tasks = ("sst2", "ud_pos")
    assert ran == {"locate_data", f"pretrain_ltr@{family}", f"extract_ltr@{family}", "report",
                   *(f"{group}_ltr@{t}-{family}" for group in ("transfer", "finetune")
                     for t in tasks)}, out
    model = copy / f"data/models/{family}"
    assert json.loads((model / "config.json").read_text())["is_decoder"] is True
    assert AutoTokenizer.from_pretrained(str(model)).tokenize("the play")[0] == "Ġthe"
    pretrain = json.loads((copy / f"metrics/pretrain_{family}.json").read_text())
    assert {"val_lm_ppl", "val_lm_acc", "val_lm_acc_most_frequent"} <= set(pretrain), pretrain
    for method in (f"{family}-feature", f"{family}-finetune"):
        for task in tasks:
            cell = json.loads((copy / f"metrics/transfer/{task}/{method}.json").read_text())
            assert len(cell["seeds"]) >= 1 and cell.get("unavailable") is None, cell
    judged = json.loads((copy / "metrics/claims.json").read_text())
    for claim in CLAIMS:
        if claim.worse.startswith(f"{family}-"):
            assert set(judged[f"{claim.better}_vs_{claim.worse}"]) == set(tasks), judged
    assert json.loads((trace / f"pretrain_ltr@{family}.modules.json").read_text()) == [
        f"ctxrep.families.{family}"]
    assert_declared_exactly(copy, trace, ran - {"locate_data"})

    # A budget of the objectives sweep changes each objective's steps (`ctxrep objectives`):
    # its tokens- and steps- experiments differ from its flops- one in the left-to-right LM's
    # alone, and then only that LM's pretraining is out of date, the other objectives and every
    # cell reading them not (DVC runs them once a budget).
    params = yaml.safe_load((copy / "params.yaml").read_text())
    params[f"pretrain_{family}"]["steps"] += 1
    (copy / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    status = json.loads(_dvc(copy, "status", "--json", env=env, stdout_only=True))
    assert set(status) - {"locate_data"} == {f"pretrain_ltr@{family}"}, status


@pytest.mark.slow
def test_a_hugging_face_checkpoint_is_configuration_and_reruns_only_its_own_stages(run, tmp_path):
    """`-S +hf.rob={path: …}` on a finished tiny run: a RoBERTa checkpoint saved by
    `save_pretrained` (byte-level BPE, an architecture the project has no code of its own for)
    is featurized by extract_hf@rob, trained on frozen by its feature-based cell and fine-tuned
    by its fine-tuned cell, and every other stage stays up to date: `dvc status` then names only
    the checkpoint's cells on the other task and the report. Every file they write is declared,
    every param and file they read too, and the features name the checkpoint's files with their
    sha256."""
    from ctxrep.io import sha256_file
    from tests.hf_checkpoints import save_tiny_checkpoint

    repo, _, env = run
    copy, trace = copy_run(repo, tmp_path / "repo"), tmp_path / "trace"
    checkpoint = save_tiny_checkpoint("roberta", tmp_path / "roberta")
    entry = f"+hf.rob={{path:{checkpoint},pooling:first,max_seq_len:64}}"
    out = _dvc(copy, "exp", "run", "-S", "profile=tiny", "-S", entry, "transfer_hf@ud_pos-rob",
               "finetune_hf@ud_pos-rob", env={**env, **NO_MLFLOW, config.TRACE_ENV: str(trace)})
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    assert ran == {"locate_data", "extract_hf@rob", "transfer_hf@ud_pos-rob",
                   "finetune_hf@ud_pos-rob"}, out
    cell = json.loads((copy / "metrics/transfer/ud_pos/hf-rob.json").read_text())
    assert len(cell["seeds"]) == 2 and len(cell["mix_weights"]["input"][0]) == 3, cell  # h_0..h_2
    tuned = json.loads((copy / "metrics/transfer/ud_pos/hf-rob-finetune.json").read_text())
    assert len(tuned["seeds"]) == 2 and tuned["method"] == "hf-rob-finetune", tuned
    assert tuned["scores"] and "bert" not in tuned, tuned  # the checkpoint, not a BERT of ours
    ledger = json.loads((copy / "reports/compute/finetune_hf@ud_pos-rob.json").read_text())
    assert ledger["flops"] > 0 and ledger["unit"] == "sub-word tokens", ledger
    record = json.loads((copy / "data/features/hf-rob/checkpoint.json").read_text())
    assert record["model_type"] == "roberta"
    assert record["files"] == {p.name: sha256_file(p) for p in checkpoint.iterdir() if p.is_file()}
    status = _dvc(copy, "status", "--json", env=env, stdout_only=True)
    always = {"locate_data"}  # it looks at the data sources on every run
    assert set(json.loads(status)) - always == {"transfer_hf@sst2-rob", "finetune_hf@sst2-rob",
                                                "report"}, status

    assert_declared_exactly(copy, trace, ran - {"locate_data"})


@pytest.mark.slow
def test_make_exp_show_fits_one_screen_with_the_headlines(run, tmp_path):
    """`make exp-show`'s own filter (read from the Makefile), run by DVC on a finished run: at
    most 40 columns, the verdict counts and the biLM's perplexity among them."""
    import re

    repo, _, env = run
    makefile = (REPO / "Makefile").read_text()
    sections = re.search(r"^PARAM_SECTIONS := (.+)$", makefile, re.M).group(1)
    drop = re.search(r"exp show --md --drop '(.+)'$", makefile, re.M).group(1)
    drop = drop.replace("$(PARAM_SECTIONS)", sections).replace("$$", "$")
    table = _dvc(repo, "exp", "show", "--md", "--drop", drop, env=env, stdout_only=True)
    header = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    assert len(header) <= 40, header
    assert {"claims.reproduced", "pretrain.bilm.val_ppl", "profile"} <= set(header), header
    assert not [c for c in header if "/" in c or c.endswith((".low", ".high"))], header


@pytest.mark.slow
def test_a_no_op_make_repro_starts_no_experiment_and_no_mlflow_run(run, tmp_path, monkeypatch):
    """On a finished run, `make repro` with the same profile says "up to date" and runs nothing:
    `dvc exp run` would make an experiment and an MLflow pipeline run for every no-op. A change
    (another param) still runs."""
    import sqlite3

    repo, _, env = run
    repo = copy_run(repo, tmp_path / "repo")
    full = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
            "MLFLOW_TRACKING_URI": f"sqlite:///{repo / 'mlflow.db'}", **env}

    def counts():
        with sqlite3.connect(repo / "mlflow.db") as db:
            mlflow_runs = db.execute("select count(*) from runs").fetchone()[0]
        exps = _dvc(repo, "exp", "list", "--all-commits", "--name-only", env=env,
                    stdout_only=True).split()
        return mlflow_runs, len(exps)

    before = counts()
    proc = subprocess.run([sys.executable, "-m", "ctxrep", "repro", "tiny"], cwd=repo, env=full,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "up to date" in proc.stderr and "dvc exp run" not in proc.stdout
    assert counts() == before
    from ctxrep.repro import up_to_date

    monkeypatch.chdir(repo)
    for key, value in full.items():
        monkeypatch.setenv(key, value)
    assert up_to_date("tiny", [])
    assert not up_to_date("tiny", ["pretrain_bert.steps=7"])  # a change still runs
