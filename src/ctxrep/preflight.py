"""``ctxrep check-params PROFILE [OVERRIDE...]``: everything that can be refused before DVC
touches an output, refused there: the profile and its composed params (each section's own
checks, :mod:`ctxrep.config`), then what no single section can see (:func:`preflight`): the
grid as a whole, this machine, and combinations a stage would refuse late. ``make repro`` runs
it first (:mod:`ctxrep.repro`), so a rejected value never reaches ``params.yaml``.

The command then says which profiles of conf/profile/ a task added to conf/config.yaml's grid
concerns (:func:`survey_profiles`): those that must fetch it (they set their own ``tasks:`` and
take ``grid.tasks`` from conf/config.yaml), and those that keep a grid of their own."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ctxrep.config import ParamError
from ctxrep.config.composition import (CONF_DIR, PARAMS_FILE, PROFILE_DIR, check_profile,
                                       compose, compose_and_dump_only, profiles)
from ctxrep.config.params import read_params

# The probe stage's tasks (dvc.yaml's probe reads both; ctxrep.transfer.probe.PROBE_KINDS).
PROBE_TASKS = ("ud_pos", "wic")
# More compute threads or processes than this many per core is a typo, not a plan.
THREADS_PER_CORE = 8


def preflight(params: dict, env=None, cores: int | None = None, gpu: bool | None = None) -> None:
    """What each stage's own section checks cannot see, refused before DVC deletes any output:
    the grid as a whole (a task listed twice, a method restricted to a task the grid does not
    run, the probe's tasks not fetched), this machine (threads and processes it cannot hold, a
    multi-machine launch without its rendezvous) and combinations a stage would refuse late
    (``compile: true`` in a portable compute mode, on a CPU). Raises :class:`ParamError`."""
    import os

    from ctxrep import compute
    from ctxrep.launch import NODE_RANK_ENV, RDZV_ENDPOINT_ENV  # read by ctxrep.launch too

    env = os.environ if env is None else env
    cores = cores or os.cpu_count() or 1
    if gpu is None:  # a CUDA device the stages may use (without importing torch here)
        visible = env.get("CUDA_VISIBLE_DEVICES")
        gpu = Path("/dev/nvidia0").exists() and visible not in ("", "-1")
    for key, names in (("tasks", params["tasks"]), ("grid.tasks", params["grid"]["tasks"])):
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ParamError(key, names, f"each task listed once ({', '.join(twice)} twice)")
    missing = [t for t in PROBE_TASKS if t not in params["tasks"]]
    if missing:
        raise ParamError("tasks", params["tasks"],
                         f"a list that includes {list(PROBE_TASKS)}, the probe stage's tasks "
                         f"({', '.join(missing)} missing)")
    for method, section in (params.get("transfer") or {}).items():
        for task in (section or {}).get("tasks") or []:
            if task not in params["grid"]["tasks"]:
                raise ParamError(f"transfer.{method}.tasks", task,
                                 f"a task of grid.tasks {params['grid']['tasks']} (the method "
                                 f"runs on these; any other entry runs it nowhere)")
    threads, launch = params["compute"]["threads"], params.get("launch") or {}
    if threads > THREADS_PER_CORE * cores:
        raise ParamError("compute.threads", threads,
                         f"at most {THREADS_PER_CORE * cores} on this machine of {cores} cores")
    nproc = launch.get("nproc_per_node", 1)
    if nproc > cores and not gpu:
        raise ParamError("launch.nproc_per_node", nproc,
                         f"at most {cores} on this machine of {cores} cores and no GPU (one "
                         f"process per core, or per GPU)")
    if launch.get("nnodes", 1) > 1 and not (env.get(RDZV_ENDPOINT_ENV) and env.get(NODE_RANK_ENV)):
        raise ParamError("launch.nnodes", launch["nnodes"],
                         f"1, or {RDZV_ENDPOINT_ENV}=host:port and {NODE_RANK_ENV} set on every "
                         f"machine (docs/setup.md, 'More than one process')")
    isa = compute.resolve(params["compute"]["isa"])
    if isa in compute.MKL_BRANCH and not gpu:
        compiled = [f"{name}.compile" for name, section in
                    [*((k, v) for k, v in params.items() if k.startswith("pretrain_")),
                     *((f"transfer.{k}", v) for k, v in (params.get("transfer") or {}).items())]
                    if isinstance(section, dict) and section.get("compile") is True]
        if compiled:
            raise ParamError(compiled[0], True,
                             f"false in compute.isa={params['compute']['isa']} on a CPU (inductor "
                             f"generates code for this CPU, so the bytes are not portable): add "
                             f"SET='compute.isa=native'")


def check(profile: str, overrides: list[str] = (), write: bool = False) -> int:
    """``ctxrep check-params PROFILE [OVERRIDE...]``: the profile name is safe and exists, and
    the params it composes to with the overrides (``key=value``, as ``dvc exp run -S`` takes
    them) are valid; 0, or 2 with the reason on stderr. ``make repro`` runs this before DVC
    touches anything, so a rejected value never reaches ``params.yaml``."""
    import tempfile

    try:
        check_profile(profile, ".")
        with tempfile.TemporaryDirectory() as tmp:
            composed = compose(profile, list(overrides), root=".", out=Path(tmp) / PARAMS_FILE)
            read_params(tmp)
        preflight(composed)
    except ParamError as err:
        print(f"ctxrep: bad params: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 — Hydra's errors (a broken conf/ file) name the file
        said = " ".join(str(err).split()) or type(err).__name__  # one line, file and line kept
        print(f"ctxrep: cannot compose profile {profile!r} from {CONF_DIR}/: {said}",
              file=sys.stderr)
        return 2
    if write:  # valid: now params.yaml, as `dvc exp run -S` would write it
        compose(profile, list(overrides), root=".")
        print(f"ctxrep: wrote {PARAMS_FILE} for profile {composed['profile']!r}; `dvc status` "
              f"now lists the stages a run would execute", file=sys.stderr)
        return 0
    print(f"ctxrep: profile {composed['profile']!r}: params valid", file=sys.stderr)
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("profile", help="a profile of conf/profile/")
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="key=value, as `dvc exp run -S` takes it")
    parser.add_argument("--write", action="store_true",
                        help=f"then write {PARAMS_FILE} (only if valid), so that `dvc status` "
                             f"says what a run of this profile would execute")
    parser.add_argument("--estimate", action="store_true",
                        help="then count the words each extract@<features> stage would "
                             "featurize, per fetched grid task and split (data/raw/tasks/)")


@dataclass
class ProfileSurvey:
    """What the profiles of conf/profile/ need when a task joins conf/config.yaml's grid."""

    missing: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # profile -> task -> the keys that read it although the profile's `tasks:` does not fetch it
    follow_grid: list[str] = field(default_factory=list)  # own `tasks:`, conf/config.yaml's grid
    own_grid: list[str] = field(default_factory=list)     # their own `grid.tasks`
    broken: dict[str, str] = field(default_factory=dict)  # profile -> why it does not compose


def tasks_read(params: dict) -> dict[str, list[str]]:
    """task -> the keys of composed ``params`` that need it fetched: ``grid.tasks``,
    ``learning_curve.tasks``, ``intrinsic.task`` and the probe's tasks."""
    reads: dict[str, list[str]] = {}
    named = [("grid.tasks", t) for t in (params.get("grid") or {}).get("tasks") or []]
    named += [("learning_curve.tasks", t)
              for t in (params.get("learning_curve") or {}).get("tasks") or []]
    named += [("intrinsic.task", (params.get("intrinsic") or {}).get("task"))]
    named += [("the probe", t) for t in PROBE_TASKS]
    for key, task in named:
        if task:
            reads.setdefault(task, []).append(key)
    return reads


def sets_itself(profile: str, key: str, root: Path | str = ".", seen=()) -> bool:
    """Whether ``profile``'s file, or a profile its ``defaults:`` list names, sets ``key``
    (``tasks`` or ``grid.tasks``) rather than taking it from conf/config.yaml."""
    path = Path(root) / PROFILE_DIR / f"{profile}.yaml"
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    value = raw
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is not None:
        return True
    bases = [b for b in raw.get("defaults") or [] if isinstance(b, str) and b != "_self_"]
    return any(sets_itself(b, key, root, (*seen, profile)) for b in bases if b not in seen)


def survey_profiles(root: Path | str = ".") -> ProfileSurvey:
    """Every profile of conf/profile/, composed as ``dvc exp run -S profile=<p>`` composes it:
    the tasks it reads but does not fetch, whether it takes ``grid.tasks`` from
    conf/config.yaml while fetching its own list (so it must fetch every task added there), and
    whether it keeps its own grid (a task added to conf/config.yaml's is not transferred there)."""
    import tempfile

    root, survey = Path(root).resolve(), ProfileSurvey()
    with tempfile.TemporaryDirectory() as tmp:
        for profile in profiles(root):
            out = Path(tmp) / f"{profile}.yaml"
            try:
                compose_and_dump_only(profile, [], root, out)
                composed = yaml.safe_load(out.read_text(encoding="utf-8"))
                own_tasks, own_grid = (sets_itself(profile, k, root) for k in ("tasks", "grid.tasks"))
            except Exception as err:  # noqa: BLE001 — Hydra's and YAML's errors name the file
                survey.broken[profile] = str(err).splitlines()[0] if str(err) else repr(err)
                continue
            fetched = composed.get("tasks") or []
            missing = {t: keys for t, keys in tasks_read(composed).items() if t not in fetched}
            if missing:
                survey.missing[profile] = missing
            if own_grid:
                survey.own_grid.append(profile)
            elif own_tasks:
                survey.follow_grid.append(profile)
    return survey


def survey_lines(survey: ProfileSurvey, lists: bool = True) -> list[str]:
    """The survey as the command prints it: one line per profile that needs a task added to
    its ``tasks:`` (or one line saying none does) or does not compose, then (``lists``) the
    profiles that follow conf/config.yaml's grid with their own ``tasks:``, and those with a
    grid of their own."""
    def readers(tasks: dict[str, list[str]]) -> str:
        return "; ".join(f"{task}: read by {', '.join(keys)}" for task, keys in tasks.items())

    lines = [f"{PROFILE_DIR}/{p}.yaml: add {', '.join(tasks)} to its own `tasks:` "
             f"({readers(tasks)})" for p, tasks in survey.missing.items()]
    if not survey.missing:
        lines.append("no profile needs a task added to its own `tasks:` (each fetches every task "
                     "its grid, learning curve, probe and intrinsic section read)")
    lines += [f"{PROFILE_DIR}/{p}.yaml does not compose: {why}" for p, why in survey.broken.items()]
    if not lists:
        return [line for line in lines if not line.startswith("no profile")]
    lines.append(f"a task added to {CONF_DIR}/config.yaml's grid.tasks must also be added to the "
                 f"own `tasks:` of: {', '.join(survey.follow_grid) or 'no profile'}")
    lines.append(f"profiles with their own grid.tasks, which transfer a task added to "
                 f"{CONF_DIR}/config.yaml's only if it is added to theirs too (none of them "
                 f"needs it fetched): {', '.join(survey.own_grid) or 'none'}")
    return lines


# The extract stages of dvc.yaml: each featurizes every grid task's examples once.
def extract_sets(params: dict) -> list[str]:
    """The feature sets the run's extract stages write: every family's and its untrained
    control's (``extract@*``), the left-to-right families the profile lists (``extract_ltr@*``)
    and its Hugging Face checkpoints (``extract_hf@*``)."""
    from ctxrep.config import FEATURE_SETS, LEFT_TO_RIGHT, hf_method

    return [*(f for f in FEATURE_SETS if f not in LEFT_TO_RIGHT), *params["left_to_right"],
            *map(hf_method, params["hf"] or {})]


def extract_words(params: dict) -> dict[str, dict[str, int] | str]:
    """task -> split -> the words each ``extract@<features>`` stage featurizes for composed
    ``params`` (the training draw of ``transfer.common.max_train_examples`` and the evaluated
    split, capped by ``max_eval_examples``), counted as extract counts them; or, for a grid
    task not fetched yet (or unavailable), why it cannot be counted."""
    from ctxrep import kinds
    from ctxrep.config import load_transfer_common
    from ctxrep.transfer.data import TaskUnavailable, load_task, spec, task_dir
    from ctxrep.transfer.features import task_words

    common, counts = load_transfer_common(params), {}
    for task in params["grid"]["tasks"]:
        if not (task_dir(task) / "MANIFEST.json").exists():
            counts[task] = f"not fetched yet (`dvc repro fetch_tasks@{task}` fetches it alone)"
            continue
        try:
            splits, _ = load_task(task, common)
        except TaskUnavailable as err:
            counts[task] = f"unavailable ({err})"
            continue
        fields = kinds.get(spec(task).kind).FIELDS
        counts[task] = {split: sum(len(task_words(example, field)) for field in fields
                                   for example in dataset.select_columns([field]))
                        for split, dataset in splits.items()}
    return counts


def estimate_lines(params: dict, counts: dict[str, dict[str, int] | str]) -> list[str]:
    """The words to extract, as ``check-params --estimate`` prints them: a total per feature
    set, one line per task, and what caps the evaluated split."""
    counted = {t: c for t, c in counts.items() if isinstance(c, dict)}
    total = sum(sum(c.values()) for c in counted.values())
    common = params["transfer"]["common"]
    cap = common.get("max_eval_examples") or 0
    sets = extract_sets(params)
    lines = [f"extract: each of its {len(sets)} stages ({', '.join(sets)}) "
             f"featurizes {total:,} words of the grid's tasks"
             + (" counted so far" if len(counted) < len(counts) else "")]
    for task, count in counts.items():
        each = (", ".join(f"{split} {n:,}" for split, n in count.items())
                if isinstance(count, dict) else count)
        lines.append(f"  {task}: {each}")
    lines.append(f"  (training draw: transfer.common.max_train_examples="
                 f"{common.get('max_train_examples')}; evaluated split: "
                 + (f"at most {cap:,} examples, transfer.common.max_eval_examples"
                    if cap else "whole, transfer.common.max_eval_examples=0 (a number caps it)")
                 + ")")
    return lines


def run(args) -> int:
    """The check of the profile named, whose verdict is the last line, after the survey of
    every profile (:func:`survey_profiles`) where the survey can bear on it: when the check
    passes, or fails on conf/ as it is (no overrides given), only the profiles that need a task
    added (or do not compose) named then. A profile that does not exist or a bad override is
    the command's mistake, not conf/'s: it is said alone, without composing every profile."""
    import contextlib
    import io

    verdict = io.StringIO()
    with contextlib.redirect_stderr(verdict):
        status = check(args.profile, args.overrides, write=args.write)
    if status == 0 or (not args.overrides and args.profile in profiles(".")):
        for line in survey_lines(survey_profiles("."), lists=status == 0):
            print(f"ctxrep: {line}", file=sys.stderr)
    print(verdict.getvalue(), end="", file=sys.stderr)
    if status == 0 and getattr(args, "estimate", False):
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            params = compose(args.profile, list(args.overrides), root=".",
                             out=Path(tmp) / PARAMS_FILE)
        for line in estimate_lines(params, extract_words(params)):
            print(f"ctxrep: {line}", file=sys.stderr)
    return status
