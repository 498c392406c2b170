import { cloudwatch } from '../api.js';
import { usePoll } from '../poll.js';
import { variantMetrics, variantQueries, variantsOf, WINDOW_S } from '../variants.js';

async function load(endpoint, variants) {
  const now = Date.now() / 1000;
  const answer = await cloudwatch('GetMetricData', {
    StartTime: now - WINDOW_S, EndTime: now, MetricDataQueries: variantQueries(endpoint, variants),
  });
  return variantMetrics(variants, answer.MetricDataResults);
}

// Each variant (production and shadow) with its own requests, errors and latency over the last minutes, side by
// side: what a shadow test compares.
export function VariantMetrics({ endpoint }) {
  const name = endpoint.EndpointName;
  const variants = variantsOf(endpoint);
  const key = variants.map((v) => v.name).join(',');
  const { value, error } = usePoll(() => load(name, variants), 5000, [name, key]);
  return (
    <div class="scroll">
      <table class="stack variant-metrics">
        <caption>Variants compared (last {WINDOW_S / 60} minutes)</caption>
        <thead>
          <tr><th scope="col">Variant</th><th scope="col">Role</th><th scope="col">Invocations</th><th scope="col">4XX errors</th><th scope="col">5XX errors</th><th scope="col">Model latency (ms, mean)</th></tr>
        </thead>
        <tbody>
          {(value || variants).map((row) => (
            <tr key={row.name} data-variant={row.name}>
              <td data-label="Variant">{row.name}</td>
              <td data-label="Role">{row.role}</td>
              <td data-label="Invocations" class="invocations">{value ? row.invocations : '…'}</td>
              <td data-label="4XX errors" class="errors-4xx">{value ? row.errors4xx : '…'}</td>
              <td data-label="5XX errors" class="errors-5xx">{value ? row.errors5xx : '…'}</td>
              <td data-label="Model latency (ms, mean)" class="latency">{value ? (row.latencyMs === null ? '–' : row.latencyMs.toFixed(1)) : '…'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {error && <p class="error" role="alert">Could not read the variants' metrics: {error.message}</p>}
    </div>
  );
}
