"""Transfer: features, feature-based task models, fine-tuning, probes, one grid cell."""
