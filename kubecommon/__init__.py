"""What the dispatcher and the simulator (``kubesim``) both use and neither owns: Kubernetes' own formats.

Neutral ground: this package imports neither ``dispatcher`` nor ``kubesim`` (an import-linter contract in
``.importlinter`` checks it), so sharing it couples neither to the other.
"""
