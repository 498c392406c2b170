"""What an hour of capacity costs, for cost per million tokens: a price given outright, or an instance type's.

The table holds the SageMaker instance types the seed articles deploy on. Its prices are on-demand list prices
for SageMaker real-time inference in us-east-1 as recorded on PRICES_AS_OF; they change, and other regions
differ. ml.c7g rows are estimates (EC2's c7g on-demand price with SageMaker's usual markup for the family).
Check https://aws.amazon.com/sagemaker/pricing/ and pass --price-per-hour to use the price you actually pay.
"""

from __future__ import annotations

from dataclasses import dataclass

from pier.bench.options import BenchError

PRICES_AS_OF = "2024-06-01"
PRICES_REGION = "us-east-1"
LIST_PRICE = f"SageMaker real-time inference on-demand list price, {PRICES_REGION}, as of {PRICES_AS_OF}"
ESTIMATE = f"estimate: EC2 on-demand price plus SageMaker's markup, {PRICES_REGION}, as of {PRICES_AS_OF}"

# USD per instance-hour.
INSTANCE_PRICES: dict[str, tuple[float, str]] = {
    "ml.c7g.large": (0.0870, ESTIMATE),
    "ml.c7g.xlarge": (0.1740, ESTIMATE),
    "ml.c7g.2xlarge": (0.3480, ESTIMATE),
    "ml.c7g.4xlarge": (0.6960, ESTIMATE),
    "ml.c7g.8xlarge": (1.3920, ESTIMATE),
    "ml.c7g.12xlarge": (2.0880, ESTIMATE),
    "ml.c7g.16xlarge": (2.7840, ESTIMATE),
    "ml.g5.xlarge": (1.4080, LIST_PRICE),
    "ml.g5.2xlarge": (1.5150, LIST_PRICE),
    "ml.g5.4xlarge": (2.0300, LIST_PRICE),
    "ml.g5.8xlarge": (3.0600, LIST_PRICE),
    "ml.g5.12xlarge": (7.0900, LIST_PRICE),
    "ml.g5.16xlarge": (5.1200, LIST_PRICE),
    "ml.g5.24xlarge": (10.1800, LIST_PRICE),
    "ml.g5.48xlarge": (20.3600, LIST_PRICE),
    "ml.p4d.24xlarge": (37.6880, LIST_PRICE),
}


@dataclass(frozen=True)
class Price:
    usd_per_hour: float  # for all instances together
    source: str


def resolve_price(usd_per_hour: float | None, instance_type: str | None, instance_count: int) -> Price | None:
    """The hourly price of what serves the target: a given price wins over the table; None when neither is set."""
    if usd_per_hour is not None:
        label = f"given: {usd_per_hour:g} USD/hour per instance"
        return Price(usd_per_hour * instance_count, f"{label} × {instance_count}" if instance_count > 1 else label)
    if instance_type is None:
        return None
    name = instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"
    if name not in INSTANCE_PRICES:
        known = ", ".join(INSTANCE_PRICES)
        raise BenchError(f"No price is recorded for {instance_type!r}. Pass --price-per-hour USD, or one of: {known}.")
    hourly, source = INSTANCE_PRICES[name]
    return Price(hourly * instance_count, f"{name} × {instance_count}: {hourly:g} USD/hour each ({source})")
