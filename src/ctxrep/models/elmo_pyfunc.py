"""The biLM as an MLflow ``pyfunc`` model: sentences in, each sentence's layer features out.

    import mlflow
    bilm = mlflow.pyfunc.load_model("models:/ctxrep-bilm@latest-default")
    feats = bilm.predict(["The cat sat .", "Hi"])
    feats[0].shape  # (L + 1, 4, 2P): layers x tokens x dim, float32
    feats[1].shape  # (L + 1, 1, 2P)

``predict`` takes a str, a list of sentences (each a str, split on whitespace, or a list of
words already tokenized), or a pandas DataFrame with one text column (or a column named
``text`` / ``sentence``), and returns a list with one float32 ``numpy`` array per sentence,
shaped ``[layers, tokens, dim]``: exactly what :class:`ctxrep.models.elmo.Elmo` gives for the
words (layer 0 the char-CNN token layer duplicated to ``2P``, layer ``l`` ``[h^fwd_l;
h^bwd_l]``; ``<S>``/``</S>`` are not part of it). An empty sentence gives ``tokens == 0``.

The model's one artifact, ``bilm``, is the saved model directory (``Elmo.save_pretrained`` /
the pretrain_bilm stage / ``ctxrep import-elmo``), loaded with ``Elmo.from_pretrained`` on CPU.
Loading needs ``ctxrep`` importable (installed) in the loading process: the logged model
refers to this class by name.
"""

from __future__ import annotations

import mlflow.pyfunc

ARTIFACT = "bilm"
TEXT_COLUMNS = ("text", "sentence", "sentences")
BATCH_SIZE = 32  # sentences per forward pass (a sentence's vectors do not depend on its batch)


def as_sentences(model_input) -> list[list[str]]:
    """``model_input`` (see the module docstring) as tokenized sentences."""
    import numpy as np
    import pandas as pd

    if isinstance(model_input, pd.DataFrame):
        columns = [c for c in model_input.columns if str(c).lower() in TEXT_COLUMNS]
        if not columns and model_input.shape[1] == 1:
            columns = list(model_input.columns)
        if len(columns) != 1:
            raise ValueError(f"expected a DataFrame with one text column (or one named "
                             f"{' / '.join(TEXT_COLUMNS)}), got columns {list(model_input.columns)}")
        model_input = model_input[columns[0]].tolist()
    elif isinstance(model_input, (pd.Series, np.ndarray)):
        model_input = model_input.tolist()
    if isinstance(model_input, str):
        model_input = [model_input]
    sentences = []
    for sentence in model_input:
        if isinstance(sentence, str):
            sentences.append(sentence.split())
        elif isinstance(sentence, (list, tuple, np.ndarray)) and all(isinstance(w, str) for w in sentence):
            sentences.append(list(sentence))
        else:
            raise ValueError(f"a sentence is a str or a list of words, got {type(sentence).__name__}")
    return sentences


class ElmoPyfunc(mlflow.pyfunc.PythonModel):
    """Sentences → per-sentence ``[layers, tokens, dim]`` features of the logged biLM."""

    def load_context(self, context) -> None:
        from ctxrep.models.elmo import Elmo

        self.elmo = Elmo.from_pretrained(context.artifacts[ARTIFACT])

    def predict(self, context, model_input, params=None):
        import torch

        sentences = as_sentences(model_input)
        features = []
        with torch.no_grad():
            for start in range(0, len(sentences), BATCH_SIZE):
                batch = sentences[start:start + BATCH_SIZE]
                out = self.elmo([words or ["."] for words in batch])  # an empty one runs as "."
                layers = out.layers.float().cpu().numpy()
                features += [layers[i, :, :len(words)].copy() for i, words in enumerate(batch)]
        return features


__all__ = ["ElmoPyfunc", "as_sentences", "ARTIFACT"]
