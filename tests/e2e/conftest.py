"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sockets import free_port


@pytest.fixture(scope="module")
def s3_url() -> Iterator[str]:
    """moto's S3 in server mode: a gateway process reaches it through AWS_ENDPOINT_URL_S3."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port())
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
