"""The model families (ctxrep.families) are listed once: every place that runs or reports a
family per name agrees with the registry."""

from pathlib import Path

import yaml

from ctxrep import config, families
from ctxrep.report import inputs, plots, summary

REPO = Path(__file__).resolve().parents[1]


def test_every_list_of_families_is_the_registry():
    from ctxrep.recipes import METRIC
    from ctxrep.transfer.extract import FEATURIZERS

    names, every = families.NAMES, (*families.NAMES, *families.LEFT_TO_RIGHT)
    assert tuple(FEATURIZERS) == every and tuple(METRIC) == names
    assert inputs.FAMILY_NAMES == names
    assert tuple(families.STARTING_POINTS) == tuple(config.BERT_MODELS)
    assert tuple(plots.HELDOUT) == names == tuple(summary.PRETRAIN_HEADLINES)
    assert tuple(summary.INTRINSIC_HEADLINES) == names
    # each family's features and its untrained control's, as the methods read them; an
    # optional family's own features only
    optional = tuple(n for n in every if families.family(n).left_to_right)
    assert optional == tuple(config.LEFT_TO_RIGHT)
    assert set(config.FEATURE_SETS) == ({f"{n}{suffix}" for n in names for suffix in ("", "-random")}
                                        | set(optional))


def test_the_pipeline_runs_every_family_and_no_other():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    names = set(families.NAMES)
    assert set(stages["extract"]["foreach"]) == set(config.FEATURE_SETS) - set(config.LEFT_TO_RIGHT)
    assert {v["model"] for v in stages["extract"]["foreach"].values()} == names
    assert set(stages["probe"]["foreach"]) == names
    assert {f"pretrain_{n}" for n in names} <= set(stages)
    for name in names:
        outs = [o if isinstance(o, str) else next(iter(o)) for o in stages[f"pretrain_{name}"]["outs"]]
        assert str(families.family(name).model_dir) in outs, name
    # the optional families' stages: one foreach (or matrix) over params left_to_right each
    for group in ("pretrain_ltr", "extract_ltr"):
        assert stages[group]["foreach"] == "${left_to_right}", group
        assert "data/models/${item}" in stages[group]["do"]["outs" if group == "pretrain_ltr" else "deps"]
    for group in ("transfer_ltr", "finetune_ltr"):
        assert stages[group]["matrix"]["family"] == "${left_to_right}", group


def test_the_default_profile_runs_no_optional_family_and_own_bert_runs_gpt(tmp_path):
    from ctxrep.config.composition import compose

    assert compose("default", root=REPO, out=tmp_path / "default.yaml")["left_to_right"] == []
    params = compose("own-bert", root=REPO, out=tmp_path / "own-bert.yaml")
    assert params["left_to_right"] == ["gpt"]
    # the same network, corpus, segments and budget as our BERT
    shared = set(params["pretrain_gpt"]) - {"source"}
    assert {k: params["pretrain_gpt"][k] for k in shared} == {k: params["pretrain_bert"][k] for k in shared}


def test_an_unknown_family_is_refused_naming_the_known():
    import pytest

    with pytest.raises(ValueError, match="unknown model family 'xlnet'; known: bilm, bert, gpt"):
        families.family("xlnet")


def _code_strings(path: Path, names: bool = True) -> list[tuple[int, str]]:
    """(line, text) of every string (and, with ``names``, every name) in a module's code:
    docstrings left out."""
    import ast

    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.append((node.lineno, node.value))
        elif isinstance(node, ast.Name) and names:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and names:
            found.append((node.lineno, node.attr))
    return found


def test_a_left_to_right_family_is_a_module_found_by_its_name():
    """Each module of ctxrep.families is a left-to-right family whose entry carries the module's
    name; the catalogue lists them without importing them (only a stage that needs an entry
    loads its module, and lists it in dvc.yaml)."""
    import subprocess
    import sys

    for name in families.LEFT_TO_RIGHT:
        entry = families.family(name)
        assert entry.name == name and entry.left_to_right and entry.section == f"pretrain_{name}"
    code = ("import sys\nfrom ctxrep import config, families\n"
            "print([m for m in sys.modules if m.rpartition('.')[2] in families.LEFT_TO_RIGHT])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_left_to_right_family_is_named_in_its_module_alone():
    """Everything about a left-to-right LM follows from its module's name and entry: no other
    module's code, no stage script and no command or dependency in dvc.yaml names it (comments
    and docstrings may), so a second one is a module plus its conf keys."""
    import re

    # "gpt" in "gpt-feature" or "pretrain_gpt", not inside another word
    names = re.compile(r"(?<![A-Za-z])(" + "|".join(families.LEFT_TO_RIGHT) + r")(?![A-Za-z])")
    own = {REPO / f"src/ctxrep/families/{name}.py" for name in families.LEFT_TO_RIGHT}
    modules = [p for p in (*(REPO / "src").rglob("*.py"), *(REPO / "stages").glob("*.py"))
               if p not in own]
    named = [f"{p.relative_to(REPO)}:{line}: {text!r}" for p in modules
             for line, text in _code_strings(p) if names.search(text)]
    assert named == []
    pipeline = [line.split("#")[0] for line in (REPO / "dvc.yaml").read_text().splitlines()]
    assert [line for line in pipeline if names.search(line)] == []


def test_make_exp_show_drops_every_params_section():
    """`make exp-show` keeps the headlines: its --drop (read from the Makefile) drops every
    top-level params key, a new family's ``pretrain_<name>`` too, but the two that say how the
    run went: its profile and its arithmetic (compute)."""
    import re

    from ctxrep.config.params import TOP_LEVEL

    makefile = (REPO / "Makefile").read_text()
    sections = re.search(r"^PARAM_SECTIONS := (.+)$", makefile, re.M).group(1)
    drop = re.search(r"exp show --md --drop '(.+)'$", makefile, re.M).group(1)
    drop = drop.replace("$(PARAM_SECTIONS)", sections).replace("$$", "$")
    kept = [k for k in TOP_LEVEL if not re.match(drop, k) and not re.match(drop, f"{k}.key")]
    assert kept == ["profile", "compute"]


def test_a_core_family_and_its_methods_are_named_in_their_own_modules_alone():
    """A core family's name and its methods' ("bilm", "elmo-io", "bert-scratch", "static") are
    keys of its own module (ctxrep/families/<name>.py) and the code it owns (its network,
    objective, stage scripts and report part, ``MODULES`` there); every other module asks the
    catalogue (ctxrep.families: METHODS, CLAIMS, TABLES, ...) instead of writing one as a key, a
    path or a stage name. Prose (messages, help, docstrings, comments) may name them; so may a
    module path (``ctxrep.models.bilm``) or a URL. I checked it fails: one ``"bilm"`` key
    added to a module outside them is named in its message."""
    import re

    left_to_right = {m for methods in families.LEFT_TO_RIGHT.values() for m in methods}
    words = sorted({*families.OWN_MODULES, *families.NAMES,
                    *(m for m in families.METHODS if m not in left_to_right)}, key=len, reverse=True)
    named = re.compile(r"(?<![A-Za-z0-9_-])(" + "|".join(map(re.escape, words)) + r")(?![A-Za-z0-9_-])")
    key = re.compile(r"[\w@./:{}-]+")   # no whitespace: a key, path or stage name, not prose
    own = {REPO / path for paths in families.OWN_MODULES.values() for path in paths}
    assert all(p.exists() for p in own), sorted(str(p) for p in own if not p.exists())
    modules = [p for p in (*(REPO / "src").rglob("*.py"), *(REPO / "stages").glob("*.py"))
               if p not in own and "families" not in p.relative_to(REPO).parts]
    naming = [f"{path.relative_to(REPO)}:{line} {text!r}" for path in modules
              for line, text in _code_strings(path, names=False)
              if key.fullmatch(text) and not text.startswith("ctxrep.") and "://" not in text
              and named.search(text)]
    assert naming == [], ("ask the catalogue (ctxrep.families) or put the code in the family's "
                          "own modules (its MODULES; the report's: ctxrep.report.parts): "
                          + "; ".join(naming))
