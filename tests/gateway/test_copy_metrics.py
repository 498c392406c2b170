"""The gateway's /metrics: each copy's metrics labelled with the copy, and copies counted by state."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from pier.backends.base import CopyState, CopyStatus
from pier.gateway.copy_metrics import exposition

COPY_TEXT = """# HELP pier_generations_total Finished generations by how they ended.
# TYPE pier_generations_total counter
pier_generations_total{{outcome="stop"}} {stop}
# HELP pier_kv_cells_used KV cells in use.
# TYPE pier_kv_cells_used gauge
pier_kv_cells_used {cells}
"""


def test_copies_metrics_are_merged_with_their_labels() -> None:
    a = CopyStatus("ic-0-aa", "ic", CopyState.READY, "http://10.0.0.2:4100")
    b = CopyStatus("ic-1-bb", "ic", CopyState.READY, "http://10.0.0.3:4100")
    c = CopyStatus("ic-2-cc", "ic", CopyState.RESTARTING)
    body, content_type = exposition([a, b, c], [(a, COPY_TEXT.format(stop=3, cells=10)),
                                                (b, COPY_TEXT.format(stop=5, cells=20)), (c, "not prometheus {")])
    assert content_type.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    generations = {s.labels["copy"]: s.value for s in families["pier_generations"].samples
                   if s.name == "pier_generations_total"}
    assert generations == {"ic-0-aa": 3, "ic-1-bb": 5}
    cells = {(s.labels["copy"], s.labels["component"]): s.value for s in families["pier_kv_cells_used"].samples}
    assert cells == {("ic-0-aa", "ic"): 10, ("ic-1-bb", "ic"): 20}
    copies = {s.labels["state"]: s.value for s in families["pier_copies"].samples}
    assert copies == {"Ready": 2, "Restarting": 1}
