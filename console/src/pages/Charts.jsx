import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson } from '../api.js';
import { usePoll } from '../poll.js';
import { Chart, round } from '../Chart.jsx';
import { ENDPOINT_PREFIX, point, views } from '../rates.js';
import { scalingActivities } from '../scaling.js';

const KEEP = 180; // points per workload: 6 minutes at one every 2 s
const EVERY_MS = 2000;

const CHARTS = [
  { title: 'Requests / s', unit: '', series: [['requests', 'finished requests/s']] },
  { title: 'Output tokens / s', unit: '', series: [['tokens', 'tokens/s']] },
  { title: 'Time to first token (ms)', unit: '', series: [['ttft50', 'p50'], ['ttft90', 'p90'], ['ttft99', 'p99']] },
  { title: 'Inter-token latency (ms)', unit: '', series: [['itl50', 'p50'], ['itl90', 'p90'], ['itl99', 'p99']] },
  // What a stream's gaps are made of: steps of streams alone, and steps carrying prompt tokens beside them.
  { title: 'Engine steps (ms)', unit: '', series: [['decode50', 'decode p50'], ['decode99', 'decode p99'],
    ['mixed50', 'mixed p50'], ['mixed99', 'mixed p99']] },
  { title: 'Queue and running', unit: '', series: [['queue', 'waiting'], ['running', 'running']] },
  { title: 'KV cache use (%)', unit: '', series: [['kv', 'busiest copy']] },
  { title: 'Copies', unit: '', series: [['ready', 'ready'], ['copies', 'all']] },
];

// History of points per workload, from successive summaries.
function useHistory() {
  const [history, setHistory] = useState({});
  const last = useRef(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let stopped = false;
    let timer;
    const tick = async () => {
      try {
        const summary = await getJson('/pier/metrics/summary');
        const previous = last.current;
        last.current = summary;
        const seconds = previous ? summary.time - previous.time : 0;
        const before = previous ? views(previous) : {};
        setHistory((old) => {
          const next = {};
          for (const [name, current] of Object.entries(views(summary))) {
            const p = point(before[name], current, seconds);
            next[name] = [...(old[name] || []), { t: summary.time, ...p }].slice(-KEEP);
          }
          return next;
        });
        setError(null);
      } catch (e) {
        setError(e);
      }
      if (!stopped) timer = setTimeout(tick, EVERY_MS);
    };
    tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, []);
  return { history, error };
}

const isEndpoint = (name) => name.startsWith(ENDPOINT_PREFIX);

export function Charts() {
  const { history, error } = useHistory();
  const names = Object.keys(history).sort();
  const [chosen, setChosen] = useState('');
  const name = names.includes(chosen) ? chosen : names.find((n) => !isEndpoint(n)) || names[0];
  return (
    <section aria-labelledby="charts-title">
      <h2 id="charts-title">Live charts</h2>
      {error && <p class="error" role="alert">Could not read the metrics: {error.message}</p>}
      {names.length === 0 && !error && <p role="status">Waiting for metrics… (a workload appears once it has copies)</p>}
      {names.length > 0 && (
        <p>
          <label for="workload">Charts of</label>{' '}
          <select id="workload" value={name} onChange={(e) => setChosen(e.currentTarget.value)}>
            <optgroup label="Endpoints (all their components)">
              {names.filter(isEndpoint).map((n) => <option key={n} value={n}>{n.slice(ENDPOINT_PREFIX.length)}</option>)}
            </optgroup>
            <optgroup label="Inference components and variants">
              {names.filter((n) => !isEndpoint(n)).map((n) => <option key={n} value={n}>{n}</option>)}
            </optgroup>
          </select>
        </p>
      )}
      {name && <Workload name={name} points={history[name]} />}
      {name && !isEndpoint(name) && <Scaling component={name} />}
    </section>
  );
}

function Workload({ name, points }) {
  const xs = points.map((p) => p.t);
  return (
    <>
      <div class="charts">
        {CHARTS.map((chart) => {
          const ys = chart.series.map(([key]) => points.map((p) => p[key]));
          const latest = chart.series.map(([key, label]) => `${label} ${round(points[points.length - 1]?.[key])}`).join(', ');
          return <Chart key={`${name}-${chart.title}`} title={chart.title} unit={chart.unit} data={[xs, ...ys]}
            series={chart.series.map(([, label]) => ({ label }))} summary={latest} />;
        })}
      </div>
    </>
  );
}

function Scaling({ component }) {
  const { value: activities } = usePoll(() => scalingActivities(component), 5000, [component]);
  if (!activities) return null; // no autoscaling API on this gateway
  return (
    <section class="card" aria-labelledby="scaling-title">
      <h3 id="scaling-title">Scaling activities</h3>
      {activities.length === 0 ? <p>None yet.</p> : (
        <div class="scroll">
          <table>
            <thead><tr><th scope="col">Started</th><th scope="col">Status</th><th scope="col">What</th><th scope="col">Why</th></tr></thead>
            <tbody>
              {activities.map((a) => (
                <tr key={a.ActivityId}>
                  <td>{when(a.StartTime)}</td><td>{a.StatusCode}</td><td>{a.Description}</td><td>{a.Cause}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

// JSON 1.1 timestamps are epoch seconds.
function when(time) {
  return typeof time === 'number' ? new Date(time * 1000).toLocaleTimeString() : String(time ?? '');
}
