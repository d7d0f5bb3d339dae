"""Params: profile merge and validation errors that name the key."""

import pytest
import yaml

from ctxrep import config
from ctxrep.config import ParamError


def _repo(tmp_path, params: dict, profiles: dict):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "profiles").mkdir()
    for name, body in profiles.items():
        (tmp_path / "profiles" / f"{name}.yaml").write_text(yaml.safe_dump(body))
    return tmp_path


def test_project_params_are_valid_under_every_profile():
    from tests.conftest import REPO

    for prof in sorted(p.stem for p in (REPO / "profiles").glob("*.yaml")):
        params = config.read_params(REPO, profile=prof)
        for section in config.SECTIONS:
            if section in params:
                config.load_section(section, params=params)


def test_profile_overrides_only_what_it_names(tmp_path):
    root = _repo(tmp_path, {"profile": "tiny", "tokenize": {"num_proc": 2, "seed": 3}},
                 {"tiny": {"tokenize": {"num_proc": 1}}, "default": {}})
    p = config.load_section("tokenize", root)
    assert (p.num_proc, p.seed) == (1, 3)
    assert config.read_params(root)["profile"] == "tiny"


@pytest.mark.parametrize("section,value,key,expected", [
    ({"num_proc": "2"}, None, "tokenize.num_proc", "an integer"),
    ({"num_proc": 0}, None, "tokenize.num_proc", ">= 1"),
    ({"lowercase": 1}, None, "tokenize.lowercase", "true or false"),
    ({"heldout_fraction": 0.9}, None, "tokenize.heldout_fraction", "< 0.5"),
    ({"nmu_proc": 2}, None, "tokenize.nmu_proc", "known keys"),
    ({"min_sentence_words": 20, "max_sentence_words": 10}, None, "tokenize.min_sentence_words",
     "max_sentence_words"),
])
def test_bad_params_name_key_and_expectation(tmp_path, section, value, key, expected):
    root = _repo(tmp_path, {"profile": "default", "tokenize": section}, {"default": {}})
    with pytest.raises(ParamError) as e:
        config.load_section("tokenize", root)
    assert e.value.key == key
    assert expected in str(e.value)


def test_choice_param(tmp_path):
    root = _repo(tmp_path, {"profile": "default", "data": {"source": "internet"}}, {"default": {}})
    with pytest.raises(ParamError, match=r"data.source.*'internet'.*\['auto', 'mirror'"):
        config.load_section("data", root)


def test_unknown_profile_lists_available(tmp_path):
    root = _repo(tmp_path, {"profile": "huge", "data": {}}, {"default": {}, "tiny": {}})
    with pytest.raises(ParamError, match=r"profile.*huge.*\['default', 'tiny'\]"):
        config.load_section("data", root)


def test_profile_cannot_invent_sections(tmp_path):
    root = _repo(tmp_path, {"profile": "tiny", "data": {}}, {"tiny": {"dtaa": {"seed": 1}}})
    with pytest.raises(ParamError, match="dtaa"):
        config.read_params(root)


def test_every_profile_names_every_section():
    """DVC tracks `profiles/<name>.yaml:<section>` per stage, so each section must exist."""
    from tests.conftest import REPO

    sections = {k for k, v in yaml.safe_load((REPO / "params.yaml").read_text()).items()
                if isinstance(v, dict)}
    for path in (REPO / "profiles").glob("*.yaml"):
        named = set(yaml.safe_load(path.read_text()) or {})
        assert named == sections, f"{path.name}: sections {sorted(sections - named)} missing"


def test_make_repro_with_an_unknown_profile_stops_with_the_choices():
    """`make repro PROFILE=x` resolves the profile through this entry point before DVC runs."""
    import subprocess
    import sys

    from tests.conftest import REPO

    proc = subprocess.run([sys.executable, "-m", "ctxrep.config", "dvc-args", "huge"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'huge'" in proc.stderr and "['default', 'full', 'tiny']" in proc.stderr
    ok = subprocess.run([sys.executable, "-m", "ctxrep.config", "dvc-args", "tiny"], cwd=REPO,
                        capture_output=True, text=True, check=True)
    assert ok.stdout.split()[:2] == ["-S", "profile=tiny"]
