"""Model selection on a development split carved from the training data.

The evaluation split is never seen during training or selection: a task model is scored on
``dev`` after every epoch, the weights of its best epoch are kept, and training stops once
``patience`` epochs in a row have not improved on the best. Then the best weights are restored
and the evaluation split is predicted once.

The selector's state (best score, best weights, the dev curve) travels in the loop's
checkpoints, so a resumed run selects exactly what an uninterrupted one would.
"""

from __future__ import annotations

import copy

import numpy as np

from ctxrep import seeds
from ctxrep.errors import InputError


def train_dev_indices(n_train: int, dev_fraction: float) -> tuple[list[int], list[int]]:
    """Split range(n_train) into (train, dev) index lists, both sorted; dev gets
    ``round(dev_fraction · n)`` examples (at least 1 when the fraction is positive)."""
    if not 0.0 <= dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be in [0, 1), got {dev_fraction}")
    n_dev = max(1, round(dev_fraction * n_train)) if dev_fraction > 0 else 0
    if n_dev >= n_train:
        raise InputError(f"{n_train} training example(s) cannot spare {n_dev} for a dev split "
                         f"(transfer.common.dev_fraction={dev_fraction}): the task needs at "
                         f"least 2 training examples")
    order = np.random.default_rng(seeds.DEV_SPLIT).permutation(n_train)
    return sorted(order[n_dev:].tolist()), sorted(order[:n_dev].tolist())


def nested_subset(indices: list[int], fraction: float) -> list[int]:
    """The first ``round(fraction · n)`` (at least 1) of ``indices`` in a fixed random order,
    sorted: subsets of one list are nested (a smaller fraction's examples are all in a larger
    one's), so a learning curve adds data and never swaps it."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    order = np.random.default_rng(seeds.NESTED_SUBSET).permutation(len(indices))
    keep = max(1, round(fraction * len(indices)))
    return sorted(indices[i] for i in order[:keep])


class BestOnDev:
    """Keeps the weights of the epoch with the best dev score (higher is better)."""

    def __init__(self, model, primary: str, patience: int):
        self.model, self.primary, self.patience = model, primary, patience
        self.best_score = float("-inf")
        self.best_epoch = 0
        self.best_state = None
        self.history: list[float] = []   # dev score after each epoch

    def update(self, scores: dict) -> None:
        score = float(scores[self.primary])
        self.history.append(score)
        if score > self.best_score:
            self.best_score, self.best_epoch = score, len(self.history)
            self.best_state = copy.deepcopy(self.model.state_dict())

    @property
    def should_stop(self) -> bool:
        """``patience`` epochs without gain, counted once the dev score has risen above its
        first epoch's: a score still flat at its start (a tagger on little data predicting "O"
        everywhere, entity F1 0) is a plateau at the trivial solution, not convergence, and
        training goes on to ``epochs``."""
        return (self.patience > 0 and self.best_epoch > 1
                and len(self.history) - self.best_epoch >= self.patience)

    def restore(self) -> None:
        if self.best_state is not None:
            self.model.load_state_dict(self.best_state)

    # -- checkpointed with the loop's state

    def state_dict(self) -> dict:
        return {"best_score": self.best_score, "best_epoch": self.best_epoch,
                "best_state": self.best_state, "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.best_score, self.best_epoch = state["best_score"], state["best_epoch"]
        self.best_state, self.history = state["best_state"], list(state["history"])


class SelectsOnDev:
    """The loop's model-selection hooks for an objective with a ``selection`` (:class:`BestOnDev`)
    and a ``dev_scores()`` method: ``evaluate`` scores dev and keeps the best epoch,
    ``should_stop`` ends training, and the selector's state travels in checkpoints."""

    selection: BestOnDev

    def dev_scores(self) -> dict:
        raise NotImplementedError

    def evaluate(self) -> dict:
        """Dev scores (the loop calls this after every epoch); the best epoch is kept."""
        scores = self.dev_scores()
        self.selection.update(scores)
        return scores

    @property
    def should_stop(self) -> bool:
        return self.selection.should_stop

    def state_dict(self) -> dict:
        return self.selection.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.selection.load_state_dict(state)


def epoch_losses(curve: list, steps_per_epoch: int) -> list[float]:
    """Mean training loss of each epoch from the loop's per-step curve."""
    losses = [row[1] for row in curve]
    return [round(float(np.mean(losses[i:i + steps_per_epoch])), 6)
            for i in range(0, len(losses), steps_per_epoch)]


def interval_losses(curve: list, boundaries: list[int]) -> list[float]:
    """Mean training loss of the steps before each boundary step and after the previous one
    (the loop's per-step curve; boundaries: the steps at which dev was scored)."""
    losses, out, start = [row[1] for row in curve], [], 0
    for end in boundaries:
        if end > start:
            out.append(round(float(np.mean(losses[start:end])), 6))
        start = end
    return out
