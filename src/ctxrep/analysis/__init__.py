"""What the numbers mean: trivial baselines, per-example statistics and bootstrap confidence
intervals, and the papers' claims judged from them.

    baselines.py   majority class, most-frequent tag per word, TF-IDF + logistic regression,
                   lexical-overlap window (span QA): fitted on the examples the methods train on
    bootstrap.py   per-example sufficient statistics of each metric; paired bootstrap CIs
    claims.py      the papers' claims, each a paired comparison with a verdict
"""
