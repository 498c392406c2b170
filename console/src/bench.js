// `pier bench --out DIR`'s summary.json, as rows and series. Pure.

export const COLUMNS = [
  ['target', 'Target'], ['mode', 'Mode'], ['level', 'Level'], ['repeat', 'Repeat'], ['completed', 'Done'], ['failed', 'Failed'],
  ['request_throughput', 'Req/s'], ['output_throughput', 'Output tok/s'], ['median_ttft_ms', 'TTFT p50 (ms)'],
  ['p99_ttft_ms', 'TTFT p99 (ms)'], ['median_itl_ms', 'ITL p50 (ms)'], ['p99_itl_ms', 'ITL p99 (ms)'], ['median_e2el_ms', 'E2E p50 (ms)'],
];

export function readSummary(text) {
  let summary;
  try {
    summary = JSON.parse(text);
  } catch (error) {
    throw new Error(`This is not JSON (${error.message}); choose the summary.json that pier bench --out wrote.`);
  }
  if (!summary || !Array.isArray(summary.runs)) {
    throw new Error('This JSON has no "runs": choose the summary.json that pier bench --out wrote, not requests.json.');
  }
  return summary;
}

// One series per target of `metric` against the load level (the median over repeats), on the levels' union.
export function seriesOf(runs, metric) {
  const levels = [...new Set(runs.map((r) => r.level))].sort((a, b) => a - b);
  const targets = [...new Set(runs.map((r) => r.target))];
  const ys = targets.map((target) => levels.map((level) => median(runs.filter((r) => r.target === target && r.level === level).map((r) => r[metric]))));
  return { levels, targets, ys };
}

export function median(values) {
  const sorted = values.filter((v) => typeof v === 'number').sort((a, b) => a - b);
  if (!sorted.length) return null;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
