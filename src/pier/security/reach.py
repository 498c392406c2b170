"""What a request path reaches, as the guard reads it: whether it is open, the dialect it speaks (pier.dialect),
the endpoint it names. The dialect decides what a caller needs and the shape of a refusal."""

from __future__ import annotations

from dataclasses import dataclass

from pier.dialect import Dialect, dialect_of

OPEN_PATHS = frozenset({"/ping"})
# The web console's page and assets hold no data: the page asks for a key and sends it with every API call, so a
# browser, which cannot add a bearer token to a page load, can open it. Everything it shows comes from guarded routes.
CONSOLE_PREFIX = "/console"
INVOKING = frozenset({Dialect.RUNTIME, Dialect.OPENAI})
AUDITED = frozenset({Dialect.CONTROL, Dialect.PIER})


@dataclass(frozen=True)
class Reach:
    dialect: Dialect
    open: bool = False  # health checks and the console's static files: no credentials needed
    endpoint: str | None = None  # the endpoint the path names
    model_in_body: bool = False  # the endpoint is the body's `model` ("ENDPOINT" or "ENDPOINT/COMPONENT")

    @property
    def invokes(self) -> bool:
        """It calls a model (SageMaker's runtime, the OpenAI routes): what an invoke key may do."""
        return not self.open and self.dialect in INVOKING

    @property
    def audited(self) -> bool:
        """The control plane and pier's own routes leave an audit line for every call."""
        return not self.open and self.dialect in AUDITED


def reach_of(path: str) -> Reach:
    """What a (percent-decoded) request path reaches. The gateway serves the runtime and OpenAI dialects only
    under /endpoints/ and /v1/; any other path that is not the control plane is pier's own (a copy's paths,
    /tokenize or /generate, included): admin only, so a new route is never open by mistake."""
    dialect = dialect_of(path)
    if path in OPEN_PATHS or path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/"):
        return Reach(dialect, open=True)
    if path.startswith("/endpoints/"):
        return Reach(dialect, endpoint=path.removeprefix("/endpoints/").partition("/")[0])
    if path.startswith("/v1/"):
        # GET /v1/models and /v1/models/MODEL name no endpoint: they answer only what the caller may call
        return Reach(dialect, model_in_body=path != "/v1/models" and not path.startswith("/v1/models/"))
    if dialect is Dialect.CONTROL:
        return Reach(dialect)
    return Reach(Dialect.PIER)
