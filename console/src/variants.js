// Each variant of an endpoint (production and shadow) with its own AWS/SageMaker metrics over a recent window, so
// the two can be compared: the queries for CloudWatch's GetMetricData (dimensions EndpointName and VariantName, as
// the gateway records every request, a shadow's included) and the table made from its answer. Pure.

export const WINDOW_S = 300;

// [name, AWS/SageMaker metric, statistic]: errors are summed, latency is the sum over the count (an average over
// the whole window, however its periods fall).
const SERIES = [
  ['inv', 'Invocations', 'Sum'],
  ['e4', 'Invocation4XXErrors', 'Sum'],
  ['e5', 'Invocation5XXErrors', 'Sum'],
  ['lat', 'ModelLatency', 'Sum'],
  ['n', 'ModelLatency', 'SampleCount'],
];

// The endpoint's variants to compare: production first, then shadow.
export function variantsOf(described) {
  return [
    ...(described.ProductionVariants || []).map((v) => ({ name: v.VariantName, role: 'production' })),
    ...(described.ShadowProductionVariants || []).map((v) => ({ name: v.VariantName, role: 'shadow' })),
  ];
}

export function variantQueries(endpoint, variants, period = WINDOW_S) {
  return variants.flatMap((variant, i) => SERIES.map(([id, metric, stat]) => ({
    Id: `v${i}_${id}`,
    MetricStat: {
      Metric: {
        Namespace: 'AWS/SageMaker', MetricName: metric,
        Dimensions: [{ Name: 'EndpointName', Value: endpoint }, { Name: 'VariantName', Value: variant.name }],
      },
      Period: period, Stat: stat,
    },
  })));
}

// One row per variant from GetMetricData's MetricDataResults: {name, role, invocations, errors4xx, errors5xx,
// latencyMs (null when it served nothing)}.
export function variantMetrics(variants, results) {
  const total = new Map((results || []).map((r) => [r.Id, (r.Values || []).reduce((a, b) => a + b, 0)]));
  return variants.map((variant, i) => {
    const of = (id) => total.get(`v${i}_${id}`) || 0;
    const count = of('n');
    return {
      ...variant,
      invocations: of('inv'),
      errors4xx: of('e4'),
      errors5xx: of('e5'),
      latencyMs: count > 0 ? of('lat') / count / 1000 : null, // ModelLatency is in microseconds
    };
  });
}
