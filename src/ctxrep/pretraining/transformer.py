"""Pretraining a network of BERT's architecture on the tokenized corpus, for a pretraining stage:
BERT's masked LM (``pretrain_bert``) or the left-to-right LM of BERT's Table 5 (``pretrain_gpt``,
the same network with causal attention). Both write a Hugging Face model folder with the corpus's
WordPiece tokenizer (or the family's own, learned from the corpus: ``Family.tokenizer``),
``metrics/<stage>.json``, the compute ledger's row and the curves."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from tokenizers import Tokenizer

from ctxrep import config, families
from ctxrep.data.tokenized import TokenizedCorpus
from ctxrep.io import atomic_dir
from ctxrep.models.bert import BertConfig, BertForPreTraining, count_parameters, flops_per_token
from ctxrep.models.bert_hf import save_pretrained
from ctxrep.pretraining.bert_objective import load_documents
from ctxrep.pretraining.publish import publish
from ctxrep.published import record_trained
from ctxrep.training.checkpoints import run_key
from ctxrep.training.distributed import default_device, init_distributed
from ctxrep.training.loop import LoopConfig, train


def tokenized_for(family: str, corpus: TokenizedCorpus, scratch: Path
                  ) -> tuple[Path, dict[str, int], dict]:
    """The folder of the tokenizer ``family`` trains with, its vocabulary, and the corpus's
    documents (sentences of token ids) per split in it: the corpus's WordPiece and the ids it
    holds, or the family's own tokenizer, learned into ``scratch`` from the training sentences,
    and every sentence encoded with it."""
    learn = families.family(family).tokenizer
    folder = corpus.root if learn is None else scratch
    if learn is not None:
        learn(corpus, scratch)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    splits = ("train", "validation")
    if learn is None:
        documents = {split: load_documents(corpus, split) for split in splits}
    else:
        documents = {split: [[e.ids for e in tokenizer.encode_batch(doc["sentences"],
                                                                     add_special_tokens=False)]
                             for doc in corpus.documents(split, columns=["sentences"])]
                     for split in splits}
    return folder, tokenizer.get_vocab(), documents


def pretrain(ctx, stage: str, family: str, objective_type, is_decoder: bool = False):
    """Train ``objective_type`` (a BertObjective) on the network the stage's params describe,
    into data/models/<family>; checkpoints in data/checkpoints/<stage>, curves in
    dvclive/<stage>. Returns the network (on the CPU) and the loop's result."""
    p = ctx.section
    out, checkpoints = Path("data/models") / family, Path("data/checkpoints") / stage
    corpus = TokenizedCorpus(p.path)
    # each process learns its own copy (the same bytes); the checkpoints' clearing removes it
    tokenizer_dir, vocab, documents = tokenized_for(family, corpus,
                                                    checkpoints / f"tokenizer-{os.getpid()}")
    with config.as_param_error(stage):  # before training
        model_config = BertConfig.from_params(p, vocab_size=len(vocab), pad_token_id=vocab["[PAD]"],
                                              is_decoder=is_decoder)

    dist = init_distributed(config.load_section("launch", ctx.params).world_size)
    device = default_device(dist)
    torch.manual_seed(p.seed)
    model = BertForPreTraining(model_config).to(device)
    objective = objective_type(model, documents["train"], documents["validation"], vocab, p,
                               device, dist)
    key = run_key(config.as_dict(p), corpus.meta)
    result = train(objective, LoopConfig.from_params(p), checkpoints / key, ctx.run, dist,
                   desc=stage, live_dir=Path("dvclive") / stage)

    if dist.main:
        with atomic_dir(out) as tmp:
            save_pretrained(model.cpu(), tmp, tokenizer_dir=tokenizer_dir,
                            do_lower_case=corpus.meta["params"]["lowercase"])
        # the LM decodes every position; BERT's count keeps flops_per_token's 15 % masked
        decoded = {"masked_fraction": 1.0} if is_decoder else {}
        publish(ctx, stage, result, {k: round(v, 4) for k, v in result.final_eval.items()},
                count_parameters(model), flops_per_token(model_config, p.max_seq_len, **decoded),
                checkpoints)
        record_trained(family, p.path)
    return model, result, dist
