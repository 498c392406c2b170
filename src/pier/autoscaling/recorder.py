"""The `AWS/SageMaker` metrics the gateway records, as SageMaker publishes them to CloudWatch, into the metric
history and as Prometheus series for the gateway's `/metrics`.

Per request (the runtime's `InvocationObserver`): Invocations, InvocationsPerCopy (1/copies, per component) or
InvocationsPerInstance (1/instances, per variant), ModelLatency and OverheadLatency (microseconds),
Invocation4XXErrors and Invocation5XXErrors (0 or 1, by the model's own status: `error_kind`).
NoCapacityInvocationFailures when a request finds its component at zero copies. Sampled by the scaler each tick:
ConcurrentRequestsPerCopy (per component) or ConcurrentRequestsPerModel (per variant), requests in flight or waiting
per desired copy (the larger of those at the instant and the average since the last sample, from the requests that
ended), and the copy counts DesiredCopyCount and CurrentCopyCount (ready copies; pier's names, per component or
variant); and, for copies on this host, CPUUtilizationNormalized and MemoryUtilizationNormalized
(/aws/sagemaker/InferenceComponents) or CPUUtilization and MemoryUtilization (/aws/sagemaker/Endpoints).

A multi-model endpoint's requests add ModelCacheHit, LoadedModelCount, and for those that waited for their model
ModelLoadingWaitTime, ModelUnloadingTime and ModelDownloadingTime (pier.multi_model's CacheReport from the copy).

Dimensions: InferenceComponentName for a component's metrics, EndpointName and VariantName for an endpoint's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from pier.autoscaling.counts import Utilization
from pier.autoscaling.history import History
from pier.autoscaling.resource import Resource
from pier.multi_model import CacheReport
from pier.runtime.observer import Invoked

NAMESPACE = "AWS/SageMaker"
COMPONENTS_NAMESPACE = "/aws/sagemaker/InferenceComponents"
ENDPOINTS_NAMESPACE = "/aws/sagemaker/Endpoints"
MICROSECONDS = 1_000_000
LABELS = ("endpoint", "variant", "component")


def error_kind(done: Invoked) -> str | None:
    """Which of Invocation4XXErrors and Invocation5XXErrors a request counts in, if either. AWS documents them
    as the InvokeEndpoint requests "where the model returned a 4xx [5xx] HTTP response code"
    (docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html), so a model's error counts by the
    model's own status, not by the 424 (ModelError) its client gets: a container answering 500 is a 5XX. A
    model that ran out of time or dropped the connection (status 0) answered nothing a client could fix: a 5XX.
    An error of the gateway's own (throttled, no copy could take it) counts by the status the client got."""
    status = done.status if done.model_status is None else (done.model_status or 500)
    if 400 <= status < 500:
        return "4XX"
    return "5XX" if status >= 500 else None


class Recorder:
    def __init__(self, history: History) -> None:
        self.history = history
        self._busy: dict[str, float] = {}  # workload -> seconds its ended requests spent, since the last busy()
        self._busy_since: dict[str, float] = {}
        self._lock = threading.Lock()  # requests end on the loop; the scaler reads `busy` on the writer thread
        self.registry = CollectorRegistry(auto_describe=True)
        self.invocations = Counter("pier_sagemaker_invocations", "Invocations (AWS/SageMaker Invocations).",
                                   LABELS, registry=self.registry)
        self.errors = Counter("pier_sagemaker_invocation_errors", "Invocation4XXErrors and Invocation5XXErrors.",
                              (*LABELS, "kind"), registry=self.registry)
        self.no_capacity = Counter("pier_sagemaker_no_capacity_invocation_failures",
                                   "Requests that found their component at zero copies.", ("component",),
                                   registry=self.registry)
        self.model_latency = Histogram("pier_sagemaker_model_latency_seconds", "ModelLatency.", LABELS,
                                       registry=self.registry)
        self.overhead_latency = Histogram("pier_sagemaker_overhead_latency_seconds", "OverheadLatency.", LABELS,
                                          registry=self.registry)
        self.concurrency = Gauge("pier_sagemaker_concurrent_requests_per_copy",
                                 "ConcurrentRequestsPerCopy (per model for a variant).", ("workload",),
                                 registry=self.registry)
        self.cpu = Gauge("pier_sagemaker_cpu_utilization_percent", "CPUUtilization(Normalized) of the copies.",
                         ("workload",), registry=self.registry)
        self.memory = Gauge("pier_sagemaker_memory_utilization_percent", "MemoryUtilization of the copies.",
                            ("workload",), registry=self.registry)
        self.model_cache_hits = Counter("pier_sagemaker_model_cache", "Multi-model requests by whether their model "
                                        "was loaded (ModelCacheHit).", ("endpoint", "variant", "result"),
                                        registry=self.registry)
        self.async_backlog = Gauge("pier_sagemaker_async_backlog", "ApproximateBacklogSize of an asynchronous "
                                   "endpoint.", ("endpoint",), registry=self.registry)
        self.copies = Gauge("pier_sagemaker_copy_count", "Desired and ready (current) copies.", ("workload", "kind"),
                            registry=self.registry)

    def invoked(self, done: Invoked) -> None:
        with self._lock:
            self._busy[done.workload] = self._busy.get(done.workload, 0.0) + done.model_s + done.overhead_s
        component = "" if "/" in done.workload else done.workload
        labels = (done.endpoint, done.variant, component)
        kind = error_kind(done)
        client_error, server_error = kind == "4XX", kind == "5XX"
        self.invocations.labels(*labels).inc()
        if kind is not None:
            self.errors.labels(*labels, kind).inc()
        self.model_latency.labels(*labels).observe(done.model_s)
        self.overhead_latency.labels(*labels).observe(done.overhead_s)
        scopes = [{"EndpointName": done.endpoint, "VariantName": done.variant}]
        if component:
            scopes.append({"InferenceComponentName": component})
        for dims in scopes:
            record = self._recorder(dims)
            record("Invocations", 1.0, "None")
            record("Invocation4XXErrors", float(client_error), "None")
            record("Invocation5XXErrors", float(server_error), "None")
            record("ModelLatency", done.model_s * MICROSECONDS, "Microseconds")
            record("OverheadLatency", done.overhead_s * MICROSECONDS, "Microseconds")
        if done.model_cache is not None:
            self._model_cache(scopes[0], done.model_cache)
        share = 1.0 / max(done.copies, 1)
        if component:
            self.history.record(NAMESPACE, "InvocationsPerCopy", scopes[1], share)
        else:
            self.history.record(NAMESPACE, "InvocationsPerInstance", scopes[0], share)

    def _model_cache(self, dims: dict[str, str], report: CacheReport) -> None:
        """A multi-model endpoint's model metrics, per request as SageMaker emits them: ModelCacheHit (1 or 0, so
        its Average is the hit rate), LoadedModelCount (the copy's models after it), and for a request that waited
        for its model, ModelLoadingWaitTime, with ModelUnloadingTime and ModelDownloadingTime when it had to unload
        or unpack (microseconds)."""
        record = self._recorder(dims)
        record("ModelCacheHit", float(report.hit), "None")
        record("LoadedModelCount", float(len(report.loaded)), "None")
        if not report.hit:
            record("ModelLoadingWaitTime", float(report.wait_us), "Microseconds")
            if report.unload_us:
                record("ModelUnloadingTime", float(report.unload_us), "Microseconds")
            if report.download_us:
                record("ModelDownloadingTime", float(report.download_us), "Microseconds")
        self.model_cache_hits.labels(dims["EndpointName"], dims["VariantName"], "hit" if report.hit else "miss").inc()

    def busy(self, workload: str, now: float) -> float:
        """Requests at once on average since the last call for `workload`, from the time the requests that ended
        since then spent in the gateway (Little's law): a sample of the requests in flight at one instant misses
        requests shorter than the sampling interval."""
        with self._lock:
            seconds = self._busy.pop(workload, 0.0)
        last = self._busy_since.get(workload)
        self._busy_since[workload] = now
        return seconds / (now - last) if last is not None and now > last else 0.0

    def no_capacity_failure(self, component: str) -> None:
        self.no_capacity.labels(component).inc()
        self.history.record(NAMESPACE, "NoCapacityInvocationFailures", {"InferenceComponentName": component}, 1.0)

    def sample(self, resource: Resource, load: float, desired: int, ready: int) -> None:
        """One tick's view of a scaled resource."""
        per_copy = load / max(desired, 1)
        name = "ConcurrentRequestsPerCopy" if resource.component is not None else "ConcurrentRequestsPerModel"
        self.history.record(NAMESPACE, name, resource.dimensions, per_copy)
        self.history.record(NAMESPACE, "DesiredCopyCount", resource.dimensions, float(desired))
        self.history.record(NAMESPACE, "CurrentCopyCount", resource.dimensions, float(ready))
        self.concurrency.labels(resource.workload).set(per_copy)
        self.copies.labels(resource.workload, "desired").set(desired)
        self.copies.labels(resource.workload, "ready").set(ready)

    def backlog(self, endpoint: str, size: int, instances: int, oldest_s: float, without_capacity: bool) -> None:
        """An asynchronous endpoint's queue, each second, as SageMaker publishes it (dimension EndpointName):
        ApproximateBacklogSize (queued and running), ApproximateBacklogSizePerInstance (over the desired instances;
        the whole backlog when there are none), ApproximateAgeOfOldestRequest (seconds) and
        HasBacklogWithoutCapacity (1 while requests wait and no instance is ready)."""
        dims = {"EndpointName": endpoint}
        self.history.record(NAMESPACE, "ApproximateBacklogSize", dims, float(size))
        self.history.record(NAMESPACE, "ApproximateBacklogSizePerInstance", dims, size / max(instances, 1))
        self.history.record(NAMESPACE, "ApproximateAgeOfOldestRequest", dims, oldest_s, "Seconds")
        self.history.record(NAMESPACE, "HasBacklogWithoutCapacity", dims, float(without_capacity))
        self.async_backlog.labels(endpoint).set(size)

    def utilization(self, resource: Resource, used: Utilization) -> None:
        """CPU and memory as SageMaker publishes them: per component, normalized over the cores
        (/aws/sagemaker/InferenceComponents); per variant, 100 per core (/aws/sagemaker/Endpoints)."""
        if resource.component is not None:
            namespace, cpu = COMPONENTS_NAMESPACE, "CPUUtilizationNormalized"
            cpu_value = used.cpu_percent / max(used.cores, 1)
            memory = "MemoryUtilizationNormalized"
        else:
            namespace, cpu, cpu_value = ENDPOINTS_NAMESPACE, "CPUUtilization", used.cpu_percent
            memory = "MemoryUtilization"
        self.history.record(namespace, cpu, resource.dimensions, cpu_value, "Percent")
        self.history.record(namespace, memory, resource.dimensions, used.memory_percent, "Percent")
        self.cpu.labels(resource.workload).set(cpu_value)
        self.memory.labels(resource.workload).set(used.memory_percent)

    def _recorder(self, dims: dict[str, str]) -> Callable[[str, float, str], None]:
        def record(name: str, value: float, unit: str) -> None:
            self.history.record(NAMESPACE, name, dims, value, unit)

        return record
