"""ctxrep: contextual word representations (ELMo biLM and BERT), reproduced end to end."""

__version__ = "0.1.0"
