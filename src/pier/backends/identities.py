"""Each backend's name and what the gateway may take for granted about it, declared once.

The registry (pier.backends.registry) reads them before a backend is chosen, without importing the backend's own
modules; each backend's class reads them too. Neither imports the other for them, so the registry may import the
backend it opens.
"""

from __future__ import annotations

from pier.backends.base import Capabilities

LOCAL_NAME = "local"
LOCAL_CAPABILITIES = Capabilities(local_processes=True)

RAY_NAME = "ray"
# Copies run on nodes, not on the gateway's host: their vCPU numbers (and so their ids) must not depend on the
# gateway's cores, or a gateway that restarts on another machine would replace every copy it could adopt.
RAY_CAPABILITIES = Capabilities(host_cores=tuple(range(256)))
