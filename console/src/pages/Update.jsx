import { useState } from 'preact/hooks';
import { listAll, sagemaker } from '../api.js';
import { updateProgress, updateRequest } from '../update.js';

const PHASE_KIND = { 'rolled back': 'bad', 'rollback failed': 'bad', shifted: 'good' };

// Where the endpoint's update stands: its phase, the share of traffic moved, and why it rolled back.
export function UpdateProgress({ endpoint }) {
  const progress = updateProgress(endpoint);
  if (!progress) return null;
  const kind = PHASE_KIND[progress.phase] || 'busy';
  return (
    <div class="update" role="status" aria-label={`Update of ${endpoint.EndpointName}`}>
      <span>{progress.config ? <>Update to <strong>{progress.config}</strong></> : 'Last update'}</span>{' '}
      <span class={`status ${kind} phase`}>{progress.phase}</span>
      {progress.config && <> <span class="moved">{Math.round(progress.moved * 100)}% of traffic moved</span></>}
      {progress.detail && <span class="muted"> ({progress.detail})</span>}
      {progress.reason && <p class="reason">Reason: {progress.reason}</p>}
    </div>
  );
}

// Start a blue/green update: a new endpoint config, and how traffic moves to it (all at once once healthy, a
// canary, or linear steps), rolled back if any of the named CloudWatch alarms fires while it bakes.
export function UpdateForm({ endpoint, onChange }) {
  const name = endpoint.EndpointName;
  const [configs, setConfigs] = useState(null);
  const [form, setForm] = useState({ config: '', type: 'ALL_AT_ONCE', percent: '50', waitS: '60', alarms: '' });
  const [note, setNote] = useState(null);
  const set = (key) => (event) => setForm((old) => ({ ...old, [key]: event.currentTarget.value }));

  const opened = async (event) => {
    if (!event.currentTarget.open || configs) return;
    try {
      const listed = await listAll('ListEndpointConfigs', 'EndpointConfigs', { SortBy: 'Name', SortOrder: 'Ascending' });
      const names = listed.map((c) => c.EndpointConfigName).filter((c) => c !== endpoint.EndpointConfigName);
      setConfigs(names);
      setForm((old) => ({ ...old, config: old.config || names[0] || '' }));
    } catch (error) {
      setNote({ kind: 'alert', text: `Could not list endpoint configs: ${error.message}` });
    }
  };

  const submit = async (event) => {
    event.preventDefault();
    setNote({ kind: 'status', text: 'Starting the update…' });
    try {
      await sagemaker('UpdateEndpoint', updateRequest(name, form.config, form));
      setNote({ kind: 'status', text: `Update to ${form.config} started.` });
      onChange();
    } catch (error) {
      setNote({ kind: 'alert', text: error.message });
    }
  };

  const id = (field) => `update-${name}-${field}`;
  const stepped = form.type !== 'ALL_AT_ONCE';
  return (
    <details class="update-form" onToggle={opened}>
      <summary>Update {name}</summary>
      <form onSubmit={submit}>
        <div class="fields">
          <div class="field">
            <label for={id('config')}>New endpoint config</label>
            <select id={id('config')} value={form.config} onChange={set('config')} required>
              {(configs || []).map((c) => <option key={c} value={c}>{c}</option>)}
            </select>
          </div>
          <div class="field">
            <label for={id('type')}>Traffic shift</label>
            <select id={id('type')} value={form.type} onChange={set('type')}>
              <option value="ALL_AT_ONCE">All at once</option>
              <option value="CANARY">Canary</option>
              <option value="LINEAR">Linear</option>
            </select>
          </div>
          {stepped && (
            <div class="field">
              <label for={id('percent')}>{form.type === 'CANARY' ? 'Canary size' : 'Step size'} (% of capacity)</label>
              <input id={id('percent')} type="number" min="1" max="100" step="1" required value={form.percent} onInput={set('percent')} />
            </div>
          )}
          <div class="field">
            <label for={id('wait')}>{stepped ? 'Wait between steps (s)' : 'Bake before the old fleet goes (s)'}</label>
            <input id={id('wait')} type="number" min="0" max="3600" step="1" required value={form.waitS} onInput={set('waitS')} />
          </div>
          <div class="field">
            <label for={id('alarms')}>Roll back on alarms (names)</label>
            <input id={id('alarms')} type="text" value={form.alarms} onInput={set('alarms')} placeholder="none" />
          </div>
        </div>
        <div class="actions">
          <button type="submit" disabled={!form.config}>Start update</button>
          {configs && configs.length === 0 && <span class="muted">No other endpoint config: create one first.</span>}
        </div>
      </form>
      {note && <p role={note.kind} class={note.kind === 'alert' ? 'error' : 'muted'}>{note.text}</p>}
    </details>
  );
}
