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

    names = families.NAMES
    assert tuple(FEATURIZERS) == names and tuple(METRIC) == names
    assert inputs.PRETRAIN_MODELS == names == inputs.PROBE_MODELS
    assert tuple(plots.HELDOUT) == names == tuple(summary.PRETRAIN_HEADLINES)
    assert tuple(summary.INTRINSIC_HEADLINES) == names
    # each family's features and its untrained control's, as the methods read them
    assert set(config.FEATURE_SETS) == {f"{n}{suffix}" for n in names for suffix in ("", "-random")}


def test_the_pipeline_runs_every_family_and_no_other():
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    names = set(families.NAMES)
    assert set(stages["extract"]["foreach"]) == set(config.FEATURE_SETS)
    assert {v["model"] for v in stages["extract"]["foreach"].values()} == names
    assert set(stages["probe"]["foreach"]) == names
    assert {f"pretrain_{n}" for n in names} <= set(stages)
    for name in names:
        outs = [o if isinstance(o, str) else next(iter(o)) for o in stages[f"pretrain_{name}"]["outs"]]
        assert str(families.family(name).model_dir) in outs, name


def test_an_unknown_family_is_refused_naming_the_known():
    import pytest

    with pytest.raises(ValueError, match="unknown model family 'gpt'; known: bilm, bert"):
        families.family("gpt")
