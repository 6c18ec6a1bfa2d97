"""The REST and watch protocol of a simulated API server, over aiohttp.

Paths, verbs, query parameters, content types, status codes and the watch stream format are the
real server's, so kubernetes_asyncio and kubectl talk to it unchanged.

:class:`ApiServer` (``server``) is put together from its parts: ``discovery`` (API groups, resource lists,
OpenAPI), ``resources`` (every verb on a resource) and ``watch`` (the event stream); ``common`` holds what they
share (responses, errors, the request target, the server's state).
"""

from .server import ApiServer

__all__ = ["ApiServer"]
