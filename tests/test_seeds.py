"""One derivation rule for seeds (ctxrep.seeds), and no seed constant anywhere else.

The derived values are pinned: every output of the pipeline depends on them, so a change to a
stride or a fixed seed must fail here before it changes dvc.lock."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ctxrep import seeds

SRC = Path(__file__).resolve().parents[1] / "src" / "ctxrep"
SEEDS_FILE = SRC / "seeds.py"


def test_derived_seeds_are_pinned():
    # base * stride + counter, with the values the pipeline has always used
    assert seeds.STEP_DROPOUT.at(3, 17) == 3 * 1_000_003 + 17 == 3_000_026
    assert seeds.BERT_MASKING.at(12345, (1 << 32) | 7) == 16_640_004_338
    assert seeds.FINETUNE_BATCHES.at(2, 3) == 2_000_009
    assert seeds.BILM_BATCHES.at(12345, 2) == 97_760_057
    assert seeds.FEATURE_BATCHES.at(1, 0) == 7_919
    assert seeds.BERT_INSTANCES.at(12345, 1) == 1_292_879_506
    assert seeds.BERT_BATCHES.at(12345, 4) == 12_349
    assert seeds.BERT_HELDOUT.at(12345, seeds.BERT_HELDOUT_COUNTER) == 12_346
    assert (seeds.SUBSAMPLE, seeds.DEV_SPLIT, seeds.NESTED_SUBSET) == (1234, 4321, 4322)
    assert (seeds.RANDOM_INIT, seeds.IMPORT_FRESH_INIT) == (0, 0)


def test_every_stream_is_declared_once_with_a_purpose():
    streams = [v for v in vars(seeds).values() if isinstance(v, seeds.Stream)]
    assert len(streams) == 8
    assert len({s.purpose for s in streams}) == len(streams)
    assert all(s.stride >= 1 and s.purpose for s in streams)


# the strides and fixed seeds above, and the names of the constants they replaced
STRIDES = {7_919, 104_729, 1_000_003}
FIXED = {1234, 4_321}
OLD_NAMES = ("RANDOM_INIT_SEED", "FRESH_INIT_SEED", "DEV_SEED", "SUBSAMPLE_SEED")


def _offenders(path: Path, root: Path = SRC) -> list[str]:
    text = path.read_text(encoding="utf-8")
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Constant) and type(node.value) is int \
                and node.value in STRIDES | FIXED:
            out.append(f"{path.relative_to(root)}:{node.lineno}: the literal {node.value}")
        if isinstance(node, ast.Name) and node.id in OLD_NAMES:
            out.append(f"{path.relative_to(root)}:{node.lineno}: {node.id}")
        # a seed mixed by hand: `seed * <int>` or `<int> * seed`
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = (node.left, node.right)
            named = [s for s in sides if isinstance(s, (ast.Name, ast.Attribute))]
            number = [s for s in sides if isinstance(s, ast.Constant) and type(s.value) is int]
            if named and number and re.search(r"seed", ast.unparse(named[0]), re.I):
                out.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    # the same literals in any spelling (1_000_003, 1000003) outside code, e.g. in a comment
    for match in re.finditer(r"\b(7_?919|104_?729|1_?000_?003)\b", text):
        line = text.count("\n", 0, match.start()) + 1
        out.append(f"{path.relative_to(root)}:{line}: {match.group(0)}")
    return sorted(set(out))


def test_no_seed_constant_lives_outside_the_seeds_module():
    offenders = [o for path in sorted(SRC.rglob("*.py")) if path != SEEDS_FILE
                 for o in _offenders(path)]
    assert offenders == []


def test_the_check_is_not_vacuous(tmp_path):
    assert _offenders(SEEDS_FILE)  # the constants are found where they do live
    probe = tmp_path / "probe.py"
    probe.write_text("def f(p, epoch):\n    return p.seed * 31 + epoch  # not 104729\n")
    assert _offenders(probe, tmp_path) == ["probe.py:2: 104729", "probe.py:2: p.seed * 31"]
