"""The parts of a running gateway, kept on `app.state.gateway` so routes reach them."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fastapi import Request

from pier.async_inference.dispatcher import AsyncInference
from pier.backends.base import Backend
from pier.control.api import ControlPlane
from pier.control.reconciler import Reconciler
from pier.control.resource_store import ResourceStore
from pier.gateway.autoscaling_parts import Autoscaling
from pier.gateway.copy_board import CopyBoard
from pier.gateway.leadership import Leadership, holder_name
from pier.gateway.stores import OpenStores
from pier.gateway.taps import Taps
from pier.gateway.targets import Targets
from pier.gateway.writer import Writer
from pier.runtime.invoke import RuntimeService
from pier.transform.service import Transforms


@dataclass
class Gateway:
    state: ResourceStore
    backend: Backend
    reconciler: Reconciler
    control: ControlPlane
    targets: Targets
    runtime: RuntimeService
    autoscaling: Autoscaling
    writer: Writer  # the AWS APIs' blocking work, off the event loop (gateway/writer.py)
    stores: OpenStores  # every store of the state folder, backed up and closed together (gateway/stores.py)
    taps: Taps | None = None  # data capture and shadow variants (gateway/taps.py)
    async_inference: AsyncInference | None = None  # InvokeEndpointAsync's queue and its runner
    transforms: Transforms | None = None  # batch transform jobs (pier.transform)
    # leader or follower of the loops (gateway/leadership.py); alone on a state folder, it leads
    leadership: Leadership = field(default_factory=lambda: Leadership(None, holder_name()))
    copy_board: CopyBoard | None = None  # with --state-url: the leader's copies, published (gateway/copy_board.py)
    # Set while its backend owns the copies (from take_over() done to let_go()): only then does a leader route by
    # its own list; taking over can take seconds, in which the copies published by the leader before still serve.
    owning: threading.Event = field(default_factory=threading.Event)
    stopping: bool = False  # the gateway is on its way out (its loops end, its backend closes)


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway
