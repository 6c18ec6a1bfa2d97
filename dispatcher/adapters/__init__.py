"""One module per workload kind: how it is taken, its pod sets, its remote copy and its status."""
