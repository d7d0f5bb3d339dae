"""Stage pretrain_bert → data/models/bert/ (a Hugging Face model dir with its tokenizer): MLM
(+NSP) pretraining on the tokenized corpus (``source: train``), or import a published BERT
directory with its own WordPiece vocabulary (``source: import``)."""

from pathlib import Path

import torch

from ctxrep import config
from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.io import atomic_dir
from ctxrep.models.bert import BertConfig, BertForPreTraining, count_parameters, flops_per_token
from ctxrep.models.bert_hf import save_pretrained
from ctxrep.models.bert_import import import_stage
from ctxrep.pretraining.bert_objective import BertObjective, load_documents
from ctxrep.pretraining.publish import publish
from ctxrep.published import record_trained
from ctxrep.model_registry import register_bert
from ctxrep.stage import stage
from ctxrep.training.checkpoints import run_key
from ctxrep.training.distributed import default_device, init_distributed
from ctxrep.training.loop import LoopConfig, train as train_loop

OUT, CKPT = Path("data/models/bert"), Path("data/checkpoints/pretrain_bert")
LIVE = Path("dvclive/pretrain_bert")  # the curves, written as it trains (ctxrep.training.curves)


def train(ctx, p) -> None:
    corpus = TokenizedCorpus(p.path)
    vocab = corpus.wordpiece_tokenizer().get_vocab()
    with config.as_param_error("pretrain_bert"):  # before any work
        model_config = BertConfig.from_params(p, vocab_size=len(vocab), pad_token_id=vocab["[PAD]"])

    dist = init_distributed(config.load_section("launch", ctx.params).world_size)
    device = default_device(dist)
    torch.manual_seed(p.seed)
    model = BertForPreTraining(model_config).to(device)
    objective = BertObjective(model, load_documents(corpus, "train"),
                              load_documents(corpus, "validation"), vocab, p, device, dist)
    key = run_key(config.as_dict(p), corpus.meta)
    result = train_loop(objective, LoopConfig.from_params(p), CKPT / key, ctx.run, dist,
                        desc="pretrain_bert", live_dir=LIVE)

    if dist.main:
        with atomic_dir(OUT) as tmp:
            save_pretrained(model.cpu(), tmp, tokenizer_dir=corpus.root,
                            do_lower_case=corpus.meta["params"]["lowercase"])
        publish(ctx, "pretrain_bert", result,
                {k: round(v, 4) for k, v in result.final_eval.items()},
                count_parameters(model), flops_per_token(model_config, p.max_seq_len), CKPT)
        if ctx.run:  # the model into MLflow's registry, tagged with its DVC hash
            register_bert(ctx.run, OUT, profile=dict.get(ctx.params, "profile"))
        record_trained("bert", p.path)
    ctx.summary(steps=result.steps, tokens=result.train_tokens,
                val_mlm_acc=round(result.final_eval["val_mlm_acc"], 3))


def import_published(ctx, p) -> None:
    import_stage(ctx, "pretrain_bert", "bert", p.path, OUT)  # its own tokenizer travels with it


with stage("pretrain_bert", "pretrain_bert") as ctx:
    (import_published if ctx.section.source == "import" else train)(ctx, ctx.section)
