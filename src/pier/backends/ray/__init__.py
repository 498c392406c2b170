"""The ray backend: copies as actors on the nodes of a Ray cluster, instances as placement groups.

| file | owns |
|---|---|
| `config.py` | `RayConfig`: the cluster's address, namespace, how instance types become bundles, node folders |
| `placement.py` | pure: an instance's bundle, the node it should go to, the missing capacity in words, a node's cores |
| `groups.py` | pier's placement groups (one per instance): created, shared, released, swept |
| `models.py` | the model's files on a node: the gateway's folder when the node sees it, else a copy into its cache |
| `actor.py` | `CopyActor`, on the node: the model, then the local backend's supervised process, its status and log |
| `backend.py` | `RayBackend`: the Backend protocol; keeps each copy alive, mirrors its log |
| `take_over.py` | the copies on the cluster when this gateway starts to lead: asked who they are, adopted or killed |
| `remote_copy.py` | `RemoteCopy`: what the gateway knows of one copy on the cluster (state, actor, instance) |
| `log_mirror.py` | `LogMirror`: the gateway's copy of a remote copy's log, which outlives its node |
| `ray_calls.py` | Ray at arm's length: imported on connect, calls on threads of their own, new actors, why one died |

Ray itself is imported only when the backend connects, so pier runs without it on the local backend.
"""

from pier.backends.ray.backend import RayBackend
from pier.backends.ray.config import ConfigError, RayConfig
from pier.backends.ray.ray_calls import RayUnavailable

__all__ = ["ConfigError", "RayBackend", "RayConfig", "RayUnavailable"]
