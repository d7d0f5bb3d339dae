"""Errors the user can fix: bad params or bad input.

A stage that meets one stops with exit status 2 and a message naming the key, or the file and
line, and what was expected: no traceback (:func:`ctxrep.stage.stage`)."""


class InputError(ValueError):
    """Params, a data file or a folder are not what the pipeline needs."""
