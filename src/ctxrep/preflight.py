"""``ctxrep check-params PROFILE [OVERRIDE...]``: everything that can be refused before DVC
touches an output, refused there: the profile and its composed params (each section's own
checks, :mod:`ctxrep.config`), then what no single section can see (:func:`preflight`): the
grid as a whole, this machine, and combinations a stage would refuse late. ``make repro`` runs
it first (:mod:`ctxrep.repro`), so a rejected value never reaches ``params.yaml``."""

from __future__ import annotations

import sys
from pathlib import Path

from ctxrep.config import ParamError
from ctxrep.config.composition import CONF_DIR, PARAMS_FILE, check_profile, compose
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
        print(f"ctxrep: cannot compose profile {profile!r} from {CONF_DIR}/: {err}",
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


def run(args) -> int:
    return check(args.profile, args.overrides, write=args.write)
