"""The CloudWatch operations AWS's scaling guides use, over the gateway's metric history: GetMetricData,
GetMetricStatistics, ListMetrics, PutMetricData, and metric alarms (PutMetricAlarm, DescribeAlarms,
DeleteAlarms) whose actions are scaling policies' ARNs. Alarms are evaluated by the scaler (scaler.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pier.autoscaling import paging
from pier.autoscaling.alarms import COMPARE, INSUFFICIENT
from pier.autoscaling.autoscaling_store import Store
from pier.autoscaling.errors import InvalidParameterValue, ResourceNotFound, UnknownOperation
from pier.autoscaling.history import STATISTICS, Bucket, History, MetricId, aggregate, matches, statistic
from pier.autoscaling.quotas import check_put_metric_data
from pier.autoscaling.wire import epoch

Body = dict[str, Any]
ALARM = "alarm"
ACCOUNT = "000000000000"
MAX_DATAPOINTS = 1440  # GetMetricStatistics' limit per call
PAGE = 50  # DescribeAlarms answers 50 a page unless MaxRecords says otherwise
MOST_ALARMS = 100  # its MaxRecords: 1 to 100
METRICS_PAGE = 500  # ListMetrics answers 500 a page


class CloudWatch:
    def __init__(self, store: Store, history: History, *, clock: Callable[[], float] = time.time,
                 changed: Callable[[], None] = lambda: None) -> None:
        self.store = store
        self.history = history
        self.clock = clock
        self.changed = changed
        self.operations: dict[str, Callable[[Body, str], Body]] = {
            "GetMetricData": self.get_metric_data,
            "GetMetricStatistics": self.get_metric_statistics,
            "ListMetrics": self.list_metrics,
            "PutMetricData": self.put_metric_data,
            "PutMetricAlarm": self.put_metric_alarm,
            "DescribeAlarms": self.describe_alarms,
            "DeleteAlarms": self.delete_alarms,
        }

    def call(self, operation: str, body: Body, region: str) -> Body:
        handler = self.operations.get(operation)
        if handler is None:
            raise UnknownOperation(f"pier does not serve CloudWatch {operation}; it serves "
                                   f"{', '.join(sorted(self.operations))}.")
        return handler(body, region)

    # ---- metrics

    def get_metric_statistics(self, body: Body, region: str) -> Body:
        start, end, period = epoch(body["StartTime"]), epoch(body["EndTime"]), int(body["Period"])
        wanted = body.get("Statistics") or []
        if body.get("ExtendedStatistics"):
            raise InvalidParameterValue("pier computes SampleCount, Average, Sum, Minimum and Maximum; percentiles "
                                        "(ExtendedStatistics) are not served.")
        if not wanted:
            raise InvalidParameterValue("Give at least one of Statistics: " + ", ".join(STATISTICS) + ".")
        unknown = [name for name in wanted if name not in STATISTICS]
        if unknown:  # botocore does not check the enum: refused here, before any datapoint asks for it
            raise InvalidParameterValue(f"Statistics {', '.join(unknown)} not valid: use {', '.join(STATISTICS)} "
                                        "(percentiles such as p99 go in ExtendedStatistics, not served by pier).")
        _check_period(period, start, end)
        metric = MetricId.of(body["Namespace"], body["MetricName"], _dims(body.get("Dimensions")))
        unit = body.get("Unit") or self._unit(metric)
        points = []
        for bucket in aggregate(self.history.seconds(metric, start, end), start, end, period):
            point: Body = {"Timestamp": float(bucket.ts), "Unit": unit}
            point.update({name: statistic(bucket, name) for name in wanted})
            points.append(point)
        return {"Label": body["MetricName"], "Datapoints": points}

    def get_metric_data(self, body: Body, region: str) -> Body:
        start, end = epoch(body["StartTime"]), epoch(body["EndTime"])
        _check_queries(body["MetricDataQueries"], start, end)
        newest_first = body.get("ScanBy", "TimestampDescending") == "TimestampDescending"
        results: list[Body] = []
        messages: list[Body] = []
        for query in body["MetricDataQueries"]:
            if not query.get("ReturnData", True):
                continue
            stat = query.get("MetricStat")
            if stat is None:
                results.append({"Id": query["Id"], "Label": query.get("Label", query["Id"]), "Timestamps": [],
                                "Values": [], "StatusCode": "InternalError",
                                "Messages": [{"Code": "Unsupported", "Value": "pier serves MetricStat queries; metric "
                                              "math (Expression) is not served."}]})
                continue
            metric = stat["Metric"]
            found = MetricId.of(metric.get("Namespace", ""), metric.get("MetricName", ""),
                                _dims(metric.get("Dimensions")))
            buckets = aggregate(self.history.seconds(found, start, end), start, end, int(stat["Period"]))
            try:
                values = [(float(b.ts), statistic(b, stat["Stat"])) for b in buckets]
            except ValueError as error:
                raise InvalidParameterValue(f"Query {query['Id']}: {error}.") from None
            if newest_first:
                values.reverse()
            results.append({"Id": query["Id"], "Label": query.get("Label", found.name),
                            "Timestamps": [t for t, _ in values], "Values": [v for _, v in values],
                            "StatusCode": "Complete"})
        return {"MetricDataResults": results, "Messages": messages}

    def list_metrics(self, body: Body, region: str) -> Body:
        filters = [(d["Name"], d.get("Value")) for d in body.get("Dimensions", [])]
        found = [m for m, _ in self.history.metrics()
                 if matches(m, body.get("Namespace"), body.get("MetricName"), filters)]
        rows = [([m.namespace, m.name, [list(d) for d in m.dims]],
                 {"Namespace": m.namespace, "MetricName": m.name,
                  "Dimensions": [{"Name": k, "Value": v} for k, v in m.dims]}) for m in found]
        return paging.page(rows, "Metrics", METRICS_PAGE, body.get("NextToken"), InvalidParameterValue)

    def put_metric_data(self, body: Body, region: str) -> Body:
        namespace = body["Namespace"]
        if namespace.startswith("AWS/"):
            raise InvalidParameterValue(f"The namespace {namespace} is reserved for AWS's own metrics (pier records "
                                        "AWS/SageMaker itself); put yours under another namespace.")
        for datum in check_put_metric_data(body, self.clock()):
            for samples in _samples(datum):  # one merge per value, whatever its count
                self.history.record_samples(namespace, datum["MetricName"], _dims(datum.get("Dimensions")), samples,
                                            datum.get("Unit", "None"),
                                            epoch(datum["Timestamp"]) if "Timestamp" in datum else None)
        return {}

    # ---- alarms

    def put_metric_alarm(self, body: Body, region: str) -> Body:
        if body.get("Metrics"):
            raise InvalidParameterValue("pier's alarms watch one metric (MetricName, Namespace, Statistic); metric "
                                        "math (Metrics) is not served.")
        for needed in ("MetricName", "Namespace", "Period"):
            if needed not in body:
                raise InvalidParameterValue(f"{needed} is required for an alarm on a metric.")
        if body.get("Statistic") not in STATISTICS:
            raise InvalidParameterValue(f"Statistic must be one of {', '.join(STATISTICS)}; percentiles "
                                        "(ExtendedStatistic) are not served.")
        _check_granularity(int(body["Period"]), (10, 20, 30), "Period")  # an alarm's, as PutMetricAlarm allows
        if body["ComparisonOperator"] not in COMPARE:
            raise InvalidParameterValue(f"pier's alarms compare with {', '.join(COMPARE)}; anomaly detection bands "
                                        "are not served.")
        if "Threshold" not in body:
            raise InvalidParameterValue("Threshold is required.")
        _check_datapoints(body)
        found = self.store.get(ALARM, body["AlarmName"]) or {}
        if found and found["AlarmName"] != body["AlarmName"]:
            raise InvalidParameterValue(
                f"An alarm named {found['AlarmName']} exists: pier tells alarm names apart regardless of case, so "
                f"{body['AlarmName']} would replace it. Use that exact name to update it, or another name.")
        now = self.clock()
        alarm = {
            "AlarmName": body["AlarmName"],
            "AlarmArn": f"arn:aws:cloudwatch:{region}:{ACCOUNT}:alarm:{body['AlarmName']}",
            "ActionsEnabled": body.get("ActionsEnabled", True),
            "OKActions": body.get("OKActions", []), "AlarmActions": body.get("AlarmActions", []),
            "InsufficientDataActions": body.get("InsufficientDataActions", []),
            "StateValue": found.get("StateValue", INSUFFICIENT),
            "StateReason": found.get("StateReason", "Unchecked: Initial alarm creation"),
            "StateUpdatedTimestamp": found.get("StateUpdatedTimestamp", now),
            "AlarmConfigurationUpdatedTimestamp": now,
            "Dimensions": body.get("Dimensions", []),
            "TreatMissingData": body.get("TreatMissingData", "missing"),
        }
        for key in ("AlarmDescription", "MetricName", "Namespace", "Statistic", "Period", "Unit",
                    "EvaluationPeriods", "DatapointsToAlarm", "Threshold", "ComparisonOperator"):
            if key in body:
                alarm[key] = body[key]
        self.store.put(ALARM, body["AlarmName"], alarm)
        self.changed()
        return {}

    def describe_alarms(self, body: Body, region: str) -> Body:
        names = set(body.get("AlarmNames") or [])
        prefix = body.get("AlarmNamePrefix", "")
        rows = [([seq], a) for seq, a in self.store.numbered(ALARM)
                if (not names or a["AlarmName"] in names) and a["AlarmName"].startswith(prefix)
                and body.get("StateValue", a["StateValue"]) == a["StateValue"]
                and (not body.get("ActionPrefix") or any(x.startswith(body["ActionPrefix"])
                                                         for x in a["AlarmActions"]))]
        size = paging.size_of(body, "MaxRecords", PAGE, MOST_ALARMS, InvalidParameterValue)
        reply = paging.page(rows, "MetricAlarms", size, body.get("NextToken"), InvalidParameterValue)
        reply["CompositeAlarms"] = []
        return reply

    def delete_alarms(self, body: Body, region: str) -> Body:
        names = body["AlarmNames"]
        missing = [n for n in names if (self.store.get(ALARM, n) or {}).get("AlarmName") != n]  # names are exact
        if missing:
            raise ResourceNotFound(f"No alarm named {', '.join(missing)}; DescribeAlarms lists the alarms. Nothing "
                                   "was deleted.")
        for name in names:
            self.store.delete(ALARM, name)
        return {}

    def _unit(self, metric: MetricId) -> str:
        return next((unit for found, unit in self.history.metrics() if found == metric), "None")


def _dims(given: list[Body] | None) -> dict[str, str]:
    return {d["Name"]: d["Value"] for d in given or []}


def _samples(datum: Body) -> list[Bucket]:
    """What one datum says was observed: each value with its count (1 when Counts is not given), or the summary
    of StatisticValues as it is."""
    if "StatisticValues" in datum:
        stats = datum["StatisticValues"]
        return [Bucket(0, stats["SampleCount"], stats["Sum"], stats["Minimum"], stats["Maximum"])]
    values = datum.get("Values") or ([datum["Value"]] if "Value" in datum else [])
    counts = datum.get("Counts") or [1.0] * len(values)
    return [Bucket(0, count, value * count, value, value) for value, count in zip(values, counts, strict=True)]


def _check_period(period: int, start: float, end: float, where: str = "Period") -> None:
    _check_granularity(period, (1, 5, 10, 20, 30), where)
    _check_range(start, end)
    if (end - start) / period > MAX_DATAPOINTS:
        raise InvalidParameterValue(f"That asks for more than {MAX_DATAPOINTS} datapoints: use a longer Period or a "
                                    "shorter time range.")



TREAT_MISSING = ("breaching", "notBreaching", "ignore", "missing")  # CloudWatch's TreatMissingData values


def _check_datapoints(alarm: dict[str, Any]) -> None:
    """What CloudWatch refuses of an alarm's evaluation: more datapoints to alarm than periods evaluated (it could
    never fire), and a TreatMissingData it does not know (it was evaluated as `missing`)."""
    periods, needed = int(alarm["EvaluationPeriods"]), alarm.get("DatapointsToAlarm")
    if needed is not None and int(needed) > periods:
        raise InvalidParameterValue(f"DatapointsToAlarm ({needed}) must be less than or equal to EvaluationPeriods "
                                    f"({periods}): the alarm fires when that many of the last EvaluationPeriods "
                                    "periods breach.")
    treat = alarm.get("TreatMissingData", "missing")
    if treat not in TREAT_MISSING:
        raise InvalidParameterValue(f"TreatMissingData {treat!r} is not one of {', '.join(TREAT_MISSING)}.")


def _check_granularity(period: int, short: tuple[int, ...], where: str) -> None:
    """AWS's periods: a multiple of a minute, or one of the short (high-resolution) ones."""
    if period <= 0 or (period >= 60 and period % 60) or (period < 60 and period not in short):
        allowed = ", ".join(str(p) for p in short)
        raise InvalidParameterValue(f"The value {period} for parameter {where} is not valid: use {allowed} or a "
                                    "multiple of 60 seconds.")


def _check_range(start: float, end: float) -> None:
    if end <= start:
        raise InvalidParameterValue("The parameter StartTime must be less than the parameter EndTime.")


def _check_queries(queries: list[Body], start: float, end: float) -> None:
    """GetMetricData's own checks: its queries' Ids unique, their periods AWS's, the range not empty."""
    _check_range(start, end)
    ids = [q["Id"] for q in queries]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise InvalidParameterValue(f"The Id {', '.join(repeated)} is used by more than one of MetricDataQueries: "
                                    "each query needs its own Id.")
    for number, query in enumerate(queries, 1):
        if "MetricStat" in query:
            _check_granularity(int(query["MetricStat"]["Period"]), (1, 5, 10, 20, 30),
                               f"MetricDataQueries.member.{number}.MetricStat.Period")
