"""Pretraining: the shared training loop, the biLM and BERT objectives and their data."""
