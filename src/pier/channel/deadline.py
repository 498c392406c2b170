"""How long a copy has for a request: the gateway's word, so the copy ends it a little before its client gives up.

The gateway sends `X-Pier-Timeout-Seconds` (a number of seconds) with a request it must answer within a client's
timeout (an asynchronous invocation's `InvocationTimeoutSeconds`); the model server ends the request once that
time has passed (pier.server.request_timeout).
"""

from __future__ import annotations

TIMEOUT_HEADER = "X-Pier-Timeout-Seconds"
