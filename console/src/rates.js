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
