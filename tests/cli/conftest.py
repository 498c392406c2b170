"""Shared fixtures: a gateway over a fake backend (tests/gateway/served.py) for the endpoint commands."""

from tests.gateway.served import sagemaker, served

__all__ = ["sagemaker", "served"]
