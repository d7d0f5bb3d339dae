"""Stage pretrain_bert → data/models/bert/ (a Hugging Face model dir with its tokenizer): MLM
(+NSP) pretraining on the tokenized corpus (``source: train``), or import a published BERT
directory with its own WordPiece vocabulary (``source: import``)."""

from pathlib import Path

from ctxrep.model_registry import register_bert
from ctxrep.models.bert_import import import_stage
from ctxrep.pretraining.bert_objective import BertObjective
from ctxrep.pretraining.transformer import pretrain
from ctxrep.stage import stage

OUT = Path("data/models/bert")


def train(ctx) -> None:
    model, result, dist = pretrain(ctx, "pretrain_bert", "bert", BertObjective)
    if dist.main and ctx.run:  # the model into MLflow's registry, tagged with its DVC hash
        register_bert(ctx.run, OUT, profile=dict.get(ctx.params, "profile"))
    ctx.summary(steps=result.steps, tokens=result.train_tokens,
                val_mlm_acc=round(result.final_eval["val_mlm_acc"], 3))


def import_published(ctx) -> None:
    import_stage(ctx, "pretrain_bert", "bert", ctx.section.path, OUT)  # its own tokenizer travels with it


with stage("pretrain_bert", "pretrain_bert") as ctx:
    (import_published if ctx.section.source == "import" else train)(ctx)
