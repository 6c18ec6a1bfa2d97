"""The simulated HAMi's own device rules, written from HAMi's source (``/work/shared/hami-rules.md``) rather than
taken from the dispatcher's placement model, so that the two can disagree.

* :mod:`.config`: names, settings and errors;
* :mod:`.requests`: per-container GPU requests and the admission webhook;
* :mod:`.devices`: registration, annotations, allocations and per-GPU usage;
* :mod:`.fit`: device scores and order, ``Fit``, node scores and the node choice;
* :mod:`.health`: the handshake and the NVIDIA backend's health check.
"""
