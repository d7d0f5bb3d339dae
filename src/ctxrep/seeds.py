"""Every seed the project derives, and every fixed seed, in one place.

The rule. A run has one base seed: a params ``seed`` (``pretrain_bilm.seed``,
``pretrain_bert.seed``) or a transfer cell's seed (``transfer.common.seeds``). The base seed
itself seeds the model's initialisation; every other random stream of the run is a *purpose*
(a :class:`Stream`: the dropout of a training step, the batches of an epoch, ...) numbered by a
counter (the step, the epoch, the micro-batch), and draws from

    seed(purpose, base, counter) = base * purpose.stride + counter

So a stream is a pure function of (base, counter): a run resumed at step k replays steps k..
exactly. With a prime stride, two bases share no seed for counters below the stride; the
stride-1 streams (BERT's epoch batches, its held-out instances) are ``base + counter``, so base
5 at epoch 1 draws what base 6 draws at epoch 0, and ``BERT_HELDOUT`` equals ``BERT_BATCHES`` at
epoch 1. ``STEP_DROPOUT`` and ``BERT_MASKING`` share a stride (one seeds torch's global generator, the
other a generator per instance). These overlaps are old and harmless, and the strides
are part of the results: every output of the pipeline depends on these
exact numbers, so an existing stream's stride never changes; a new purpose gets a new
:class:`Stream` here. What must be the same in every run (which examples a task keeps, which go
to dev, how an untrained control is initialised) uses a fixed seed, the constants below.

No other module holds a seed constant or mixes seeds (``tests/test_seeds.py`` checks).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stream:
    """One purpose's random stream within a run: ``at(base, counter) = base * stride + counter``."""

    purpose: str
    stride: int

    def at(self, base: int, counter: int) -> int:
        return base * self.stride + counter


# ---------------------------------------------------------------------------------- the loop
# torch's global generator before each optimizer step (dropout): ctxrep.training.loop
STEP_DROPOUT = Stream("dropout of a training step (counter: the optimizer step)", 1_000_003)

# ------------------------------------------------------------------------------- pretraining
# ctxrep.pretraining.bilm_objective
BILM_BATCHES = Stream("the biLM's length-bucketed batches of an epoch (counter: the epoch)", 7_919)
# ctxrep.pretraining.bert_objective
BERT_INSTANCES = Stream("BERT's training instances (segment pairs) of an epoch "
                        "(counter: the epoch)", 104_729)
BERT_BATCHES = Stream("BERT's length-bucketed batches of an epoch (counter: the epoch)", 1)
# One generator per training instance, not per micro-batch: an instance's masks are then the
# same whichever micro-batch, padding or DDP rank it lands in, so N processes mask the global
# batch exactly as one does. Fresh each epoch (the id holds the epoch).
BERT_MASKING = Stream("BERT's masked positions of one training instance "
                      "(counter: the instance's id, epoch << 32 | index)", 1_000_003)
BERT_HELDOUT = Stream("BERT's held-out instances (counter: always 1)", 1)
BERT_HELDOUT_COUNTER = 1

# ---------------------------------------------------------------------------------- transfer
# ctxrep.transfer.feature_train
FEATURE_BATCHES = Stream("a feature-based task model's batches of an epoch (counter: the epoch)",
                         7_919)
# ctxrep.transfer.finetune
FINETUNE_BATCHES = Stream("a fine-tuned BERT's batches of an epoch (counter: the epoch)",
                          1_000_003)

# ------------------------------------------------------------------------------- fixed seeds
# ctxrep.transfer.data: extract and every transfer cell keep the same examples of a task.
SUBSAMPLE = 1234
# ctxrep.transfer.selection: every method and baseline of a task carves the same dev examples;
# a learning curve's nested subsets of the rest are drawn from the next seed.
DEV_SPLIT = 4_321
NESTED_SUBSET = DEV_SPLIT + 1
# ctxrep.transfer.extract: the untrained controls (bilm-random, bert-random) are the saved
# model's architecture with the fresh initialisation its constructor draws from this seed.
RANDOM_INIT = 0
# ctxrep.models.bert_import: the parts a published checkpoint lacks, initialised the same way on
# every import.
IMPORT_FRESH_INIT = 0
# ctxrep.analysis.bootstrap: the resamples of every confidence interval.
BOOTSTRAP = 20_260_101
