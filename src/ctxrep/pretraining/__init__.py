"""Pretraining: the biLM and BERT objectives and their data, and what a pretraining stage
publishes once trained (the training loop itself is :mod:`ctxrep.training`)."""
