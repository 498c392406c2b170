import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson, getText } from '../api.js';
import { usePoll } from '../poll.js';
import { device, hostGpus } from '../devices.js';
import { Status } from './Endpoints.jsx';

// A dead copy waits out a backoff of 1 s before its first restart: polling faster shows that it is restarting.
// /pier/copies reads the backend's statuses only, so this costs the gateway next to nothing.
const EVERY_MS = 500;

export function Copies({ path }) {
  const filter = path?.[0] ? decodeURIComponent(path[0]) : '';
  const { value, error } = usePoll(() => getJson('/pier/copies'), EVERY_MS);
  const [selected, setSelected] = useState(null);
  const gpus = usePoll(() => getJson('/pier/gpus'), 10000).value;
  const copies = (value?.copies || []).filter((c) => !filter || c.component === filter);
  return (
    <section aria-labelledby="copies-title">
      <h2 id="copies-title">Copies{filter && ` of ${filter}`}</h2>
      {filter && <p><a href="#/copies">Show every copy</a></p>}
      {gpus && <p class="gpus">{hostGpus(gpus)}</p>}
      {error && <p class="error" role="alert">Could not list copies: {error.message}</p>}
      {value && copies.length === 0 && <p>No copies{filter && ` of ${filter}`}.</p>}
      {copies.length > 0 && (
        <div class="scroll">
          <table class="stack">
            <caption class="visually-hidden">Copies</caption>
            <thead>
              <tr><th scope="col">Copy</th><th scope="col">Workload</th><th scope="col">State</th><th scope="col">Instance</th><th scope="col">Cores</th><th scope="col">Device</th><th scope="col">Kernels</th><th scope="col">Restarts</th><th scope="col">Concurrency</th><th scope="col">Message</th><th scope="col">Log</th></tr>
            </thead>
            <tbody>
              {copies.map((c) => (
                <tr key={c.copy_id} data-copy={c.copy_id}>
                  <td data-label="Copy">{c.copy_id}</td>
                  <td data-label="Workload">{c.component}</td>
                  <td data-label="State" class="copy-state"><Status value={c.state} /></td>
                  <td data-label="Instance">{c.instance ? `${c.instance} (${c.instance_type})` : '–'}</td>
                  <td data-label="Cores">{c.cores?.length ? c.cores.join(', ') : '–'}</td>
                  <td data-label="Device" class="device">{device(c)}</td>
                  <td data-label="Kernels" class="kernels">{c.kernels || '–'}</td>
                  <td data-label="Restarts" class="restarts">{c.restarts}</td>
                  <td data-label="Concurrency">{c.concurrency ?? '–'}</td>
                  <td data-label="Message" class="reason">{c.message}</td>
                  <td data-label="Log"><button type="button" aria-pressed={selected === c.copy_id} onClick={() => setSelected(c.copy_id)}>Show log</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {selected && <Log copyId={selected} />}
    </section>
  );
}

function Log({ copyId }) {
  const [live, setLive] = useState(true);
  const { value, error } = usePoll(() => getText(`/pier/copies/${encodeURIComponent(copyId)}/logs?lines=200`), live ? 1500 : 0, [copyId, live]);
  const pre = useRef(null);
  const box = useRef(null);
  useEffect(() => {
    box.current?.scrollIntoView({ block: 'nearest' }); // below the table, off a phone's screen
  }, [copyId]);
  useEffect(() => {
    if (live && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [value, live]);
  return (
    <section ref={box} class="card" aria-labelledby="log-title">
      <h3 id="log-title">Log of {copyId}</h3>
      <label class="check"><input type="checkbox" checked={live} onChange={(e) => setLive(e.currentTarget.checked)} /> Live tail</label>
      {error && <p class="error" role="alert">{error.message}</p>}
      <pre ref={pre} class="log" role="log" aria-live={live ? 'polite' : 'off'} tabindex="0">{value ?? 'Loading…'}</pre>
    </section>
  );
}
