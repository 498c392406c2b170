"""The `pier` command. It wires parts together and holds no logic of its own."""

from pier.cli import bench, build_model, endpoints, keys, serve, state, transforms, tune
from pier.cli.app import app

__all__ = ["app", "bench", "build_model", "endpoints", "keys", "serve", "state", "transforms", "tune"]
