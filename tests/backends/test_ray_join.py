"""Joining a cluster that is not ready yet: tried again with a growing pause, for at most join_wait_s."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import pytest

from pier.backends.ray.config import ConfigError, RayConfig
from pier.backends.ray.join import Attempts, _host_port, driver_options, join, pauses, probe
from tests.sockets import free_port


@pytest.mark.parametrize(("wait_s", "expected"), [
    (0, []),
    (0.5, []),
    (1, [1.0]),
    (3, [1.0, 2.0]),
    (6, [1.0, 2.0]),
    (7, [1.0, 2.0, 4.0]),
    (60, [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0]),
])
def test_pauses_double_up_to_a_ceiling_and_fit_the_wait(wait_s: float, expected: list[float]) -> None:
    assert pauses(wait_s) == expected


class Cluster:
    """ray.init and ray.shutdown of a cluster that refuses the first `refusals` joins, on a clock that only sleeps
    move (an attempt itself takes `attempt_s`)."""

    def __init__(self, refusals: int, error: Exception, attempt_s: float = 0.0) -> None:
        self.refusals, self.error, self.attempt_s = refusals, error, attempt_s
        self.now, self.inits, self.resets, self.slept = 0.0, 0, 0, list[float]()

    def init(self) -> None:
        self.inits += 1
        self.now += self.attempt_s
        if self.inits <= self.refusals:
            raise self.error

    def reset(self) -> None:
        self.resets += 1

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def attempts(self, wait_s: float) -> Attempts:
        return Attempts(wait_s, clock=lambda: self.now, sleep=self.sleep)


SERVER_FAILED = RuntimeError("Initialization failure from server:\nTraceback (most recent call last):\n  File ...\n"
                             "RuntimeError: Starting Ray client server failed. See ray_client_server_23000.err")


@pytest.mark.parametrize("error", [SERVER_FAILED, ConnectionError("ray client connection timeout")])
def test_a_cluster_that_refuses_a_few_times_is_joined(error: Exception, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(refusals=3, error=error)
    with caplog.at_level(logging.WARNING, logger="pier.backends.ray"):
        join(cluster.init, cluster.reset, "ray://head:10001", cluster.attempts(60))
    assert (cluster.inits, cluster.resets, cluster.slept) == (4, 3, [1.0, 2.0, 4.0])
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3 and all("ray://head:10001" in w and "join_wait_s" in w for w in warnings)
    # the cause is the traceback's last line, not its first
    assert "Starting Ray client server failed" in warnings[0] or "connection timeout" in warnings[0]


def test_the_last_refusal_is_raised_once_the_wait_is_spent() -> None:
    cluster = Cluster(refusals=100, error=SERVER_FAILED, attempt_s=5.0)
    with pytest.raises(RuntimeError, match="Starting Ray client server failed"):
        join(cluster.init, cluster.reset, "ray://head:10001", cluster.attempts(30))
    # attempts take 5 s each: 0-5, pause 1, 6-11, pause 2, 13-18, pause 4, 22-27; a pause of 8 would end past 30
    assert (cluster.inits, cluster.slept) == (4, [1.0, 2.0, 4.0])
    assert cluster.now <= 30


def test_no_wait_means_one_attempt() -> None:
    cluster = Cluster(refusals=1, error=ConnectionError("refused"))
    with pytest.raises(ConnectionError):
        join(cluster.init, cluster.reset, "head:6379", cluster.attempts(0))
    assert (cluster.inits, cluster.slept) == (1, [])


def test_an_address_ray_cannot_parse_is_raised_at_once() -> None:
    cluster = Cluster(refusals=1, error=ValueError("Invalid address"))
    with pytest.raises(ValueError):
        join(cluster.init, cluster.reset, "nonsense", cluster.attempts(60))
    assert (cluster.inits, cluster.resets, cluster.slept) == (1, 0, [])


@pytest.mark.parametrize(("raw", "expected"), [({}, 60.0), ({"join_wait_s": 0}, 0.0), ({"join_wait_s": 300}, 300.0)])
def test_join_wait_s_is_read_from_the_config(raw: dict[str, float], expected: float) -> None:
    assert RayConfig.model_validate(raw).join_wait_s == expected


def test_a_negative_join_wait_is_refused() -> None:
    with pytest.raises(ValueError, match="join_wait_s"):
        RayConfig.model_validate({"join_wait_s": -1})


@pytest.mark.parametrize(("address", "expected"), [
    ("auto", (None, None)),
    ("", (None, None)),
    ("10.0.0.5:6379", ("10.0.0.5", 6379)),
    ("ray://head.svc:10001", ("head.svc", 10001)),
    ("ray://head.svc", ("head.svc", None)),  # Ray's default port: nothing to probe
    ("head", ("head", None)),
    ("[::1]:6379", ("::1", 6379)),
    ("host:notaport", (None, None)),  # Ray says what is wrong with it
])
def test_the_address_to_probe(address: str, expected: tuple[str | None, int | None]) -> None:
    assert _host_port(address) == expected


def test_a_head_that_takes_no_connection_fails_the_attempt_at_once() -> None:
    port = free_port()  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=f"nothing takes connections at 127.0.0.1:{port}"):
        probe(f"127.0.0.1:{port}")
    with pytest.raises(ConnectionError):
        probe(f"ray://127.0.0.1:{port}")
    assert time.monotonic() - started < 5


def test_a_head_that_listens_passes_the_probe() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        probe(f"127.0.0.1:{port}")
        probe(f"ray://127.0.0.1:{port}")
    probe("auto")  # nothing to probe


@pytest.mark.parametrize(("raw", "expected"), [
    ({}, {"namespace": "pier"}),
    ({"namespace": "team-a", "address": "10.0.0.5:6379"}, {"namespace": "team-a"}),
    ({"address": "10.0.0.5:6379", "node_ip_address": "127.0.0.2"},
     {"namespace": "pier", "_node_ip_address": "127.0.0.2"}),  # the raylet Ray attaches the driver to
])
def test_the_drivers_options(raw: dict[str, str], expected: dict[str, str]) -> None:
    assert driver_options(RayConfig.model_validate(raw)) == {
        **expected, "logging_level": logging.WARNING, "log_to_driver": False}


def test_a_node_ip_address_with_ray_client_is_refused_saying_what_to_give(tmp_path: Path) -> None:
    config = tmp_path / "ray.yaml"
    config.write_text("node_ip_address: 127.0.0.2\n")
    with pytest.raises(ConfigError, match=r"ray\.yaml: node_ip_address picks a raylet .* give the GCS address"):
        RayConfig.load(config, address="ray://head.svc:10001")
    assert RayConfig.load(config, address="head.svc:6379").node_ip_address == "127.0.0.2"
