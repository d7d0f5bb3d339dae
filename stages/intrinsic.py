"""Stage intrinsic: the pretrained biLM and BERT on a text outside their corpus's domain →
data/intrinsic/<task>-<split>.txt (the text) and metrics/intrinsic.json (the scores).

The text is the first ``intrinsic.max_sentences`` sentences of a fetched task's split, one a
line; each model scores it exactly as ``ctxrep perplexity MODEL TEXT`` does (the same function,
:func:`ctxrep.perplexity.score`), so the command reproduces the numbers. A model that cannot be
scored (imported weights without an LM head), or a task no location could serve, is recorded
with the reason.
"""

from pathlib import Path

import torch  # noqa: F401 — loaded before stage(), which sets its kernels (ctxrep.compute)

from ctxrep import perplexity
from ctxrep.config import ParamError
from ctxrep.data.sources import verify
from ctxrep.errors import InputError
from ctxrep.families import CORE, NAMES
from ctxrep.io import atomic_dir
from ctxrep.stage import stage

MODELS = {name: CORE[name].model_dir for name in NAMES}
OUT = Path("data/intrinsic")


class Unavailable(Exception):
    pass


def sentences_of(task: str, split: str, limit: int) -> list[str]:
    """The split's first ``limit`` sentences as text: a tagging task's tokens joined by spaces,
    or the ``text`` field (and ``text_pair``, its own line) of a sentence task."""
    import datasets

    folder = Path("data/raw/tasks") / task
    manifest = verify(folder)
    if not manifest.get("available"):
        raise Unavailable(f"`{task}` is unavailable here: {manifest.get('reason')}")
    dd = datasets.load_from_disk(str(folder / "dataset"))
    if split not in dd:
        raise ParamError("intrinsic.split", split, f"a split of {task}: {sorted(dd)}")
    rows = dd[split]
    fields = [f for f in ("tokens", "text", "text_pair") if f in rows.column_names]
    if not fields:
        raise ParamError("intrinsic.task", task, "a task with sentences (a tokens or text field)")
    lines = []
    for row in rows:
        for f in fields:
            line = " ".join(row[f]) if f == "tokens" else row[f]
            if line.strip():
                lines.append(line.strip())
    return lines[:limit]


with stage("intrinsic", "intrinsic") as ctx:
    p = ctx.section
    text = OUT / f"{p.task}-{p.split}.txt"
    result = {"text": {"task": p.task, "split": p.split, "path": str(text)}}
    try:
        lines = sentences_of(p.task, p.split, p.max_sentences)
    except Unavailable as e:  # a machine without the task: recorded, the pipeline goes on
        lines, result["text"]["unavailable"] = [], str(e)
    with atomic_dir(OUT) as tmp:
        if lines:
            (tmp / text.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    result["text"]["lines"] = len(lines)
    words = 0
    for name, model in MODELS.items():
        if not lines:
            result[name] = {"unavailable": result["text"]["unavailable"]}
            continue
        try:
            scores = perplexity.score(model, text, p.bert_max_tokens if name == perplexity.BERT else None)
        except InputError as e:
            result[name] = {"unavailable": str(e)}
            continue
        scores.pop("model"), scores.pop("text")
        result[name] = scores
        words += scores["tokens"]
    ctx.write_metrics("metrics/intrinsic.json", result)
    ctx.compute(amount=words, unit="tokens scored")
    shown = {name: result[name].get("perplexity_mean", result[name].get("pseudo_perplexity"))
             for name in MODELS}
    ctx.summary(**{f"{name}_ppl": round(v, 1) if isinstance(v, float) else v
                   for name, v in shown.items()})
