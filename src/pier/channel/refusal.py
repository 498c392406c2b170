"""A copy's word that it refused a request before doing any of its work, so the gateway may send it elsewhere.

A model server's answer carries `X-Pier-Refused` (value: the error code) when it refused the request while
loading, shutting down or full; nothing of the request ran, so the gateway may try another copy. Without the
header an error is the request's own and goes back to the client.
"""

from __future__ import annotations

REFUSED_HEADER = "X-Pier-Refused"
