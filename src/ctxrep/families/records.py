"""What a family declares: its transfer methods, the papers' claims about them, and the papers'
numbers the report prints beside ours. Plain records (standard library only: the report and the
params catalogue read them), so the catalogue (:mod:`ctxrep.config.methods`), the claims
(:mod:`ctxrep.analysis.claims`), the task model (:mod:`ctxrep.models.feature_models`) and the
report iterate over families instead of naming their methods.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

def section_of(name: str) -> str:
    """A family's params section and the name of its stage script's run: ``pretrain_<name>``."""
    return f"pretrain_{name}"


def model_dir_of(name: str) -> Path:
    return Path("data/models") / name


@dataclass(frozen=True)
class Family:
    name: str
    label: str                     # how the report names it
    # metrics/pretrain_<name>.json keys that are headlines (metrics/headline.json, summary.json):
    # held-out quality and the budget it took
    headlines: tuple[str, ...]
    # The rest is read for the core families only (a left-to-right family leaves them None):
    # the held-out curve (dvclive/pretrain_<name>): its metric key, its label, and whether the
    # panel's axis is perplexity (log scale; the train loss drawn as exp(loss)) or loss
    heldout: tuple[str, str, bool] | None = None
    recipe_metric: str | None = None   # what `ctxrep recipes` compares recipes on (held-out)
    recipe_lower_is_better: bool = False
    intrinsic: tuple[str, str] | None = None  # metrics/intrinsic.json: its key there, its short name
    # its featurizer: the class in ctxrep.transfer.extract that reads its layers per word (a
    # left-to-right LM is BERT's network, read by BERT's)
    featurizer: str | None = None
    left_to_right: bool = False    # a left-to-right LM, run where params left_to_right lists it
    # A left-to-right family's own tokenizer: tokenizer(corpus, out_dir) writes a folder that
    # ``transformers.AutoTokenizer`` loads (tokenizer.json, tokenizer_config.json), learned from
    # the tokenized corpus; None: the corpus's WordPiece, BERT's.
    tokenizer: Callable[[Any, Path], None] | None = None

    @property
    def model_dir(self) -> Path:
        return model_dir_of(self.name)

    @property
    def section(self) -> str:
        return section_of(self.name)


# How a feature-based method combines a model's N frozen layers h_0 .. h_{N-1} into one vector
# per word (:class:`ctxrep.models.feature_models.LayerCombiner`):
#   LEARNED   γ · Σ_j softmax(s)_j · h_j, s and γ trained with the task model (ELMo's eq. 1)
#   AVERAGE   (1/N) · Σ_j h_j, nothing trained (ELMo Table 2's λ = 1 limit)
#   TOKEN     h_0, the context-free token layer alone
#   LAST      h_{N-1}, the top layer alone
LEARNED, AVERAGE, TOKEN, LAST = "learned", "average", "token", "last"
MIXES = (LEARNED, AVERAGE, TOKEN, LAST)


@dataclass(frozen=True)
class Method:
    """One way of transferring a family's representation to a task.

    A feature-based method (``fine_tuned`` False) trains a task model on the frozen features
    ``data/features/<features>`` (None: on the static word vectors x_k alone), combined per
    ``mix``, beside x_k where ``reads_word_vectors``. A fine-tuned one trains the family's network
    and a task head together; ``from_scratch``: from a fresh initialisation of that network.
    ``control``: a method that exists to be compared against (an untrained network, one layer
    alone), which the report marks as such.
    """

    name: str
    features: str | None = None
    mix: str | None = None
    reads_word_vectors: bool = True
    fine_tuned: bool = False
    from_scratch: bool = False
    control: bool = False
    at_output: bool = False        # the mix enters the task encoder's output too (ELMo Table 3)

    def __post_init__(self):
        if self.mix is not None and self.mix not in MIXES:
            raise ValueError(f"{self.name}: mix {self.mix!r} is none of {', '.join(MIXES)}")
        if (self.mix is not None) != (not self.fine_tuned and self.features is not None):
            raise ValueError(f"{self.name}: a method that reads frozen features has a mix, no "
                             f"other one")

    @property
    def untrained(self) -> bool:
        """Reads an untrained network's features (a random-init control's ``<set>-random``)."""
        return (self.features or "").endswith("-random")


@dataclass(frozen=True)
class Claim:
    """``better`` scores above ``worse`` on a task (every task where ``tasks`` is None)."""

    better: str
    worse: str
    statement: str
    source: str
    tasks: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Published:
    """A number a paper printed, as the seed documents give it (a percentage)."""

    value: float
    source: str          # paper, table and column
    seed_file: str
    std: float | None = None
    decimals: int = 1    # as printed in the paper

    def __str__(self) -> str:
        value = f"{self.value:.{self.decimals}f}"
        return value if self.std is None else f"{value} ± {self.std:.{self.decimals}f}"


@dataclass(frozen=True)
class PaperTable:
    """One of a paper's tables as the report rebuilds it over our tasks: its methods (columns)
    and the published numbers, task → method → number."""

    key: str
    title: str
    methods: tuple[str, ...]
    question: str
    published: dict[str, dict[str, Published]]


# The seed files the published numbers and claims come from (under ../shared/seeds/).
ELMO_EXPLAINER = "004_605a6f4b5c248933.txt"   # ELMo walk-through: Tables 1-3, biLM, probes
ELMO_OVERVIEW = "002_8d12d86fa3a1161d.txt"    # CoVe → ELMo overview; repeats Table 1 (rounded)
BERT_OVERVIEW = "000_fd5599df7007f5cd.txt"    # ELMo and BERT overview; BERT sizes and corpus
