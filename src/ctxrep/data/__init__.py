"""Data sets: the registry, sources (mirror, Hub, package), readers and canonical schemas."""
