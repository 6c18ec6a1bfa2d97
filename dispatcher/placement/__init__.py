"""The placement engine: pure functions and small classes, no I/O.

It takes a capacity snapshot of the worker clusters and returns decisions with a reason for every worker.
Nothing here holds a client or touches SQL, so it is unit-tested and benchmarked without servers.
"""
