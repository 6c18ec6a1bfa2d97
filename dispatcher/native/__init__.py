"""Kueue-native mode: the dispatcher as MultiKueue's external dispatcher (``dispatcher run --mode kueue-external``).

:mod:`.rules` holds MultiKueue's rules for an external dispatcher (Kueue v0.17.0) as pure functions,
:mod:`.nominator` decides and writes the nominations, :mod:`.run` wires them to the clusters.
"""
