"""Stage pretrain_bilm → data/models/bilm/: train the ELMo biLM on the tokenized corpus
(``source: train``), or import published bilm-tf / AllenNLP weights (``source: import``)."""

import shutil
from pathlib import Path

import torch

from ctxrep import config
from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.io import atomic_dir
from ctxrep.models.bilm import BiLM, BiLMConfig, flops_per_token
from ctxrep.models.elmo import Elmo
from ctxrep.models.elmo_import import load_bilm_tf
from ctxrep.pretraining.bilm_objective import (BiLMObjective, WordTypes, load_sentences,
                                               unigram_perplexity)
from ctxrep.pretraining.publish import publish
from ctxrep.published import elmo_files, publish_import, record_trained
from ctxrep.model_registry import register_bilm
from ctxrep.stage import stage
from ctxrep.training.checkpoints import run_key
from ctxrep.training.distributed import default_device, init_distributed
from ctxrep.training.loop import LoopConfig, train as train_loop

OUT, CKPT = Path("data/models/bilm"), Path("data/checkpoints/pretrain_bilm")
LIVE = Path("dvclive/pretrain_bilm")  # the curves, written as it trains (ctxrep.training.curves)


def train(ctx, p) -> None:
    corpus = TokenizedCorpus(p.path)
    vocab, _ = corpus.word_vocab()
    with config.as_param_error("pretrain_bilm"):  # before any work
        model_config = BiLMConfig.from_params(p, vocab_size=len(vocab))

    dist = init_distributed(config.load_section("launch", ctx.params).world_size)
    device = default_device(dist)
    torch.manual_seed(p.seed)
    model = BiLM(model_config).to(device)
    ctx.tag("lstm_implementation", model.lstm_implementation(device))
    types = WordTypes(vocab)
    train = load_sentences(corpus, "train", types)
    heldout = load_sentences(corpus, "validation", types, max_sentences=p.eval_sentences)
    chars, targets = types.tables()
    objective = BiLMObjective(model, train, heldout, chars, targets, p.batch_size, p.seed, device,
                              dist)

    # Checkpoints are keyed by the params and the data, so a changed run never resumes an old one.
    key = run_key(config.as_dict(p), corpus.meta)
    result = train_loop(objective, LoopConfig.from_params(p), CKPT / key, ctx.run, dist,
                        desc="pretrain_bilm", live_dir=LIVE)

    if dist.main:
        with atomic_dir(OUT) as tmp:
            Elmo(model.cpu(), vocab).save_pretrained(tmp)
            # the training counts: `ctxrep perplexity`'s unigram reference on any text
            shutil.copy2(Path(p.path) / "bilm_vocab.tsv", tmp / "bilm_vocab.tsv")
        unigram = unigram_perplexity(train, heldout, targets, len(vocab))
        ev = result.final_eval
        publish(ctx, "pretrain_bilm", result, {
            "val_ppl_forward": round(ev["val_ppl_forward"], 3),
            "val_ppl_backward": round(ev["val_ppl_backward"], 3),
            "val_ppl": round(ev["val_ppl"], 3), "unigram_ppl": round(unigram, 3),
            "params_without_softmax": model.num_parameters(include_softmax=False),
        }, model.num_parameters(), flops_per_token(model_config), CKPT)
        if ctx.run:  # the model into MLflow's registry, tagged with its DVC hash
            register_bilm(ctx.run, OUT, profile=dict.get(ctx.params, "profile"))
        record_trained("bilm", p.path)
    ctx.summary(steps=result.steps, tokens=result.train_tokens,
                val_ppl=round(result.final_eval["val_ppl"], 1))


def import_published(ctx, p) -> None:
    options, weights = elmo_files(p.path)
    bilm, char_spec = load_bilm_tf(options, weights)  # no softmax, no vocabulary: features only
    with atomic_dir(OUT) as tmp:
        Elmo(bilm, [], char_spec).save_pretrained(tmp)
    n_params = bilm.num_parameters()
    record = publish_import(ctx, "pretrain_bilm", "bilm", p.path, [options, weights],
                            {"params": n_params, "params_without_softmax": n_params})
    ctx.summary(imported=p.path, params=n_params,
                sha256=", ".join(f"{f['name']} {f['sha256'][:12]}" for f in record["files"]))


with stage("pretrain_bilm", "pretrain_bilm") as ctx:
    (import_published if ctx.section.source == "import" else train)(ctx, ctx.section)
