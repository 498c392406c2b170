"""What one set of copies serves: an inference component, or the model of a classic endpoint's variant."""

from __future__ import annotations


class Workload(str):
    """A workload's name: an inference component's own name, or `<endpoint>/<variant>` for a classic variant
    (component names cannot hold a '/', so the two never clash). It is a string so that it keys dicts, sorts and
    labels copies in a backend as it is; this class is the one place that knows how the name is made."""

    __slots__ = ()

    @classmethod
    def of_component(cls, name: str) -> Workload:
        return cls(name)

    @classmethod
    def of_variant(cls, endpoint: str, variant: str, fleet: str = "") -> Workload:
        """A fleet made by an update is `<endpoint>/<variant>@<fleet>`: it runs beside the old one (variant names
        hold no '@')."""
        return cls(f"{endpoint}/{variant}@{fleet}" if fleet else f"{endpoint}/{variant}")

    @property
    def slug(self) -> str:
        """The name as it may stand in a copy id or a file name."""
        return self.replace("/", "--")
