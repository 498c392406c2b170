// Live numbers from two cumulative summaries (GET /pier/metrics/summary), as Prometheus's rate() and
// histogram_quantile() compute them. Pure.

// Per-second increase of a counter; a copy that restarted resets its counters, so a drop counts as no increase.
export function rate(previous, current, seconds) {
  if (!(seconds > 0) || previous == null) return null;
  return Math.max(0, current - previous) / seconds;
}

// The buckets' increase between two summaries: [[le, count], ...] cumulative, le ascending ("+Inf" last).
export function bucketDelta(previous, current) {
  const before = new Map((previous || []).map(([le, count]) => [String(le), count]));
  return (current || []).map(([le, count]) => [le, Math.max(0, count - (before.get(String(le)) || 0))]);
}

// The q-quantile of cumulative buckets, interpolated linearly inside its bucket; null when nothing was observed.
// A quantile in the +Inf bucket reads as the highest finite bound.
export function quantile(buckets, q) {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1][1];
  if (!(total > 0)) return null;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const [le, count] of buckets) {
    if (le === '+Inf') return lowerBound;
    if (count >= rank) {
      const width = count - lowerCount;
      return width > 0 ? lowerBound + ((le - lowerBound) * (rank - lowerCount)) / width : le;
    }
    lowerBound = le;
    lowerCount = count;
  }
  return lowerBound;
}

// One point of every chart for one workload, from its previous and current summary entries.
export function point(previous, current, seconds) {
  const ttft = bucketDelta(previous?.ttft, current.ttft);
  const itl = bucketDelta(previous?.itl, current.itl);
  const decode = bucketDelta(previous?.step_decode, current.step_decode);
  const mixed = bucketDelta(previous?.step_mixed, current.step_mixed);
  const copies = current.copies || {};
  return {
    requests: rate(previous?.generations, current.generations, seconds),
    tokens: rate(previous?.generated_tokens, current.generated_tokens, seconds),
    ttft50: ms(quantile(ttft, 0.5)),
    ttft90: ms(quantile(ttft, 0.9)),
    ttft99: ms(quantile(ttft, 0.99)),
    itl50: ms(quantile(itl, 0.5)),
    itl90: ms(quantile(itl, 0.9)),
    itl99: ms(quantile(itl, 0.99)),
    decode50: ms(quantile(decode, 0.5)),
    decode99: ms(quantile(decode, 0.99)),
    mixed50: ms(quantile(mixed, 0.5)),
    mixed99: ms(quantile(mixed, 0.99)),
    queue: (current.engine_waiting || 0) + (current.gateway_waiting || 0),
    running: current.running || 0,
    kv: 100 * (current.kv_usage || 0),
    ready: copies.Ready || 0,
    copies: Object.values(copies).reduce((a, b) => a + b, 0),
  };
}

function ms(seconds) {
  return seconds === null ? null : seconds * 1000;
}

const SUMMED = ['generations', 'generated_tokens', 'prompt_tokens', 'in_flight', 'running', 'engine_waiting', 'gateway_waiting'];
// Histograms, as cumulative buckets: time to first token, inter-token latency, the engine's steps by kind.
const BUCKETED = ['ttft', 'itl', 'step_decode', 'step_mixed', 'step_prompt'];
export const ENDPOINT_PREFIX = 'endpoint:'; // SageMaker names have no ':', so no workload is named so

// An endpoint's summary entry: its workloads' added up (counters, gauges, copies by state, histogram buckets by
// bound, so its percentiles are of all its requests); KV use is the busiest copy's.
export function combine(entries) {
  const combined = { copies: {}, kv_usage: Math.max(0, ...entries.map((e) => e.kv_usage || 0)) };
  for (const key of SUMMED) combined[key] = entries.reduce((total, e) => total + (e[key] || 0), 0);
  for (const e of entries) {
    for (const [state, count] of Object.entries(e.copies || {})) combined.copies[state] = (combined.copies[state] || 0) + count;
  }
  for (const key of BUCKETED) {
    const bounds = new Map();
    for (const e of entries) {
      for (const [le, count] of e[key] || []) bounds.set(String(le), [le, (bounds.get(String(le))?.[1] || 0) + count]);
    }
    combined[key] = [...bounds.values()].sort(([a], [b]) => (a === '+Inf') - (b === '+Inf') || (a === '+Inf' ? 0 : a - b));
  }
  return combined;
}

// What the charts page can show from one summary: every workload, and every endpoint's workloads combined.
export function views(summary) {
  const out = {};
  const byEndpoint = {};
  for (const [name, entry] of Object.entries(summary.workloads)) {
    out[name] = entry;
    if (entry.endpoint) (byEndpoint[entry.endpoint] ||= []).push(entry);
  }
  for (const [endpoint, entries] of Object.entries(byEndpoint)) out[ENDPOINT_PREFIX + endpoint] = combine(entries);
  return out;
}
