"""A `pier up` gateway in its own process (`python -m pier.gateway`), for end-to-end tests."""

from __future__ import annotations

import sys
from pathlib import Path

from pier.security.client_trust import ssl_context
from tests.certificates import Certificates
from tests.server.processes import ServerProcess, pier_environment


class GatewayProcess(ServerProcess):
    what = "gateway"

    def __init__(self, state_dir: Path, port: int, log: Path, env: dict[str, str] | None = None,
                 options: tuple[str, ...] = ()) -> None:
        self.state_dir = state_dir
        self.env = env
        environment = pier_environment(OMP_WAIT_POLICY="passive", **(env or {}))  # copies share 2 cores with tests
        super().__init__([sys.executable, "-m", "pier.gateway", "--port", str(port), "--state-dir", str(state_dir),
                          *options], port, log, environment)


class HttpsGatewayProcess(ServerProcess):
    """`pier up --tls-cert FILE --tls-key FILE`, as an operator starts a gateway that serves HTTPS."""

    what = "gateway"

    def __init__(self, state_dir: Path, port: int, log: Path, certificates: Certificates,
                 env: dict[str, str] | None = None) -> None:
        self.state_dir = state_dir
        environment = pier_environment(OMP_WAIT_POLICY="passive", **(env or {}))
        super().__init__([sys.executable, "-m", "pier", "up", "--port", str(port), "--state-dir", str(state_dir),
                          "--tls-cert", str(certificates.cert), "--tls-key", str(certificates.key)],
                         port, log, environment)
        self.url = f"https://127.0.0.1:{port}"
        self.verify = ssl_context(certificates.ca)
