"""The `pier` command. It wires parts together and holds no logic of its own."""

from pier.cli import bench, endpoints, keys, models, serve, state, transforms, tune
from pier.cli.app import app

__all__ = ["app", "bench", "endpoints", "keys", "models", "serve", "state", "transforms", "tune"]
