import { useState } from 'preact/hooks';
import { COLUMNS, readSummary, seriesOf } from '../bench.js';
import { Chart, round } from '../Chart.jsx';

const PLOTS = [
  ['output_throughput', 'Output tokens / s'],
  ['median_ttft_ms', 'TTFT p50 (ms)'],
  ['median_itl_ms', 'Inter-token latency p50 (ms)'],
  ['request_throughput', 'Requests / s'],
];

export function Bench() {
  const [summary, setSummary] = useState(null);
  const [error, setError] = useState(null);
  const open = async (event) => {
    const file = event.currentTarget.files?.[0];
    if (!file) return;
    try {
      setSummary(readSummary(await file.text()));
      setError(null);
    } catch (e) {
      setSummary(null);
      setError(e);
    }
  };
  const runs = summary?.runs || [];
  const mode = runs[0]?.mode === 'rate' ? 'request rate (req/s)' : 'concurrency';
  return (
    <section aria-labelledby="bench-title">
      <h2 id="bench-title">Bench results</h2>
      <p class="muted">Open the <code>summary.json</code> that <code>pier bench TARGET --out DIR</code> wrote. It is read in this browser only.</p>
      <label class="block">summary.json <input type="file" accept=".json,application/json" onChange={open} /></label>
      {error && <p class="error" role="alert">{error.message}</p>}
      {summary && (
        <>
          <h3>{summary.name || 'Runs'}{summary.interrupted && ' (interrupted)'}</h3>
          <div class="scroll">
            <table class="stack">
              <caption class="visually-hidden">Runs</caption>
              <thead><tr>{COLUMNS.map(([key, label]) => <th key={key} scope="col">{label}</th>)}</tr></thead>
              <tbody>
                {runs.map((run, i) => (
                  <tr key={i}>{COLUMNS.map(([key, label]) => <td key={key} data-label={label}>{typeof run[key] === 'number' ? round(run[key]) : run[key] ?? '–'}</td>)}</tr>
                ))}
              </tbody>
            </table>
          </div>
          <div class="charts">
            {PLOTS.map(([metric, title]) => {
              const { levels, targets, ys } = seriesOf(runs, metric);
              return <Chart key={metric} title={`${title} by ${mode}`} time={false} data={[levels, ...ys]}
                series={targets.map((label) => ({ label }))}
                summary={targets.map((t, i) => `${t}: ${ys[i].map(round).join(', ')}`).join('; ')} />;
            })}
          </div>
        </>
      )}
    </section>
  );
}
