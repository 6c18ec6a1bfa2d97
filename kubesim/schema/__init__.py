"""The simulator's schema layer: the project's compact form of the real API schemas, and what it is used for.

* ``model``: loading the shipped file (``kubesim/data/schemas.json.gz``) and looking up kinds and nodes;
* ``decode``: decoding built-in kinds as the apiserver's JSON decoder does;
* ``crd``: pruning, defaulting and validating custom resources as apiextensions-apiserver does, with ``validate``
  (OpenAPI validation with kube-openapi's messages, list types) and ``cel`` (their CEL rules);
* ``gosemantics``: what both render and parse as Go does (values in messages, times, quantities, base64);
* ``openapi``: OpenAPI v3 documents rebuilt from the compact form, for kubectl (``openapi_paths``: their paths);
* ``build``: the generator of the compact file from the upstream documents.
"""

from .model import KindInfo, KindSchema, Node, Schemas
from .openapi import ResourceRoute, openapi_v3_document, openapi_v3_paths

__all__ = [
    "KindInfo",
    "KindSchema",
    "Node",
    "ResourceRoute",
    "Schemas",
    "openapi_v3_document",
    "openapi_v3_paths",
]
