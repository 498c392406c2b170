"""Shared fixtures: a gateway over a fake backend (tests/gateway/served.py)."""

from tests.gateway.served import sagemaker, served

__all__ = ["sagemaker", "served"]
