"""sha256 of each pretraining corpus's mirror files, one module per corpus (``SHA256``), written
by ``ctxrep pin <corpus>`` and checked by ``fetch_corpus`` as a task's pins are by its fetch."""
