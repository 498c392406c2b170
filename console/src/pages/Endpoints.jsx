import { useEffect, useRef, useState } from 'preact/hooks';
import { listAll, sagemaker } from '../api.js';
import { usePoll } from '../poll.js';
import { updateProgress } from '../update.js';
import { UpdateForm, UpdateProgress } from './Update.jsx';
import { VariantMetrics } from './VariantMetrics.jsx';

async function load() {
  const listed = await listAll('ListEndpoints', 'Endpoints', { SortBy: 'Name', SortOrder: 'Ascending' });
  const endpoints = await Promise.all(listed.map((e) => sagemaker('DescribeEndpoint', { EndpointName: e.EndpointName })
    .catch((error) => ({ ...e, FailureReason: error.message }))));
  const components = await listAll('ListInferenceComponents', 'InferenceComponents', { SortBy: 'Name', SortOrder: 'Ascending' });
  const described = await Promise.all(components.map((c) => sagemaker('DescribeInferenceComponent', { InferenceComponentName: c.InferenceComponentName })
    .catch((error) => ({ ...c, FailureReason: error.message }))));
  return { endpoints, components: described };
}

export function Status({ value }) {
  const kind = { InService: 'good', Ready: 'good', Failed: 'bad', UpdateRollbackFailed: 'bad', Restarting: 'warn', Deleting: 'warn' }[value] || 'busy';
  return <span class={`status ${kind}`}>{value}</span>;
}

export function Endpoints({ admin }) {
  const { value, error, reload } = usePoll(load, 3000);
  return (
    <section aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Endpoints and inference components</h2>
      {error && <p class="error" role="alert">Could not list endpoints: {error.message}</p>}
      {value === undefined && !error && <p role="status">Loading…</p>}
      {value && value.endpoints.length === 0 && <p>No endpoints yet. Deploy one on the <a href="#/deploy">Deploy</a> page or with <code>pier deploy FILE.yaml</code>.</p>}
      {value?.endpoints.map((endpoint) => (
        <Endpoint key={endpoint.EndpointName} endpoint={endpoint} admin={admin} onChange={reload}
          components={value.components.filter((c) => c.EndpointName === endpoint.EndpointName)} />
      ))}
    </section>
  );
}

function Endpoint({ endpoint, components, admin, onChange }) {
  const variants = endpoint.ProductionVariants || [];
  return (
    <article class="card" aria-labelledby={`ep-${endpoint.EndpointName}`}>
      <h3 id={`ep-${endpoint.EndpointName}`}>{endpoint.EndpointName} <Status value={endpoint.EndpointStatus} /></h3>
      {endpoint.FailureReason && !updateProgress(endpoint) && <p class="reason">Reason: {endpoint.FailureReason}</p>}
      <p class="muted">Config {endpoint.EndpointConfigName || '–'}</p>
      <UpdateProgress endpoint={endpoint} />
      {variants.length > 0 && (
        <div class="scroll">
          <table>
            <caption>Variants</caption>
            <thead><tr><th scope="col">Variant</th><th scope="col">Instances (current / desired)</th></tr></thead>
            <tbody>
              {variants.map((v) => (
                <tr key={v.VariantName}><td>{v.VariantName}</td><td>{v.CurrentInstanceCount ?? '–'} / {v.DesiredInstanceCount ?? '–'}</td></tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {endpoint.ShadowProductionVariants?.length > 0 && <VariantMetrics endpoint={endpoint} />}
      {components.length > 0 && (
        <div class="scroll">
          <table class="stack">
            <caption>Inference components</caption>
            <thead>
              <tr><th scope="col">Component</th><th scope="col">Status</th><th scope="col">Copies (current / desired)</th><th scope="col">Reason</th>{admin && <th scope="col">Change copies</th>}</tr>
            </thead>
            <tbody>
              {components.map((c) => (
                <tr key={c.InferenceComponentName}>
                  <td data-label="Component"><a href={`#/copies/${encodeURIComponent(c.InferenceComponentName)}`}>{c.InferenceComponentName}</a></td>
                  <td data-label="Status"><Status value={c.InferenceComponentStatus} /></td>
                  <td data-label="Copies (current / desired)" class="copies-count">{c.RuntimeConfig?.CurrentCopyCount ?? '–'} / {c.RuntimeConfig?.DesiredCopyCount ?? '–'}</td>
                  <td data-label="Reason" class="reason">{c.FailureReason || ''}</td>
                  {admin && <td data-label="Change copies"><CopyCount component={c} onChange={onChange} /></td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {admin && <UpdateForm endpoint={endpoint} onChange={onChange} />}
    </article>
  );
}

function CopyCount({ component, onChange }) {
  const name = component.InferenceComponentName;
  const desired = component.RuntimeConfig?.DesiredCopyCount ?? 1;
  const [count, setCount] = useState(String(desired));
  const editing = useRef(false);
  useEffect(() => {
    if (!editing.current) setCount(String(desired)); // follow changes made elsewhere, never over the user's typing
  }, [desired]);
  const [note, setNote] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    setNote({ kind: 'status', text: 'Updating…' });
    try {
      await sagemaker('UpdateInferenceComponentRuntimeConfig', { InferenceComponentName: name, DesiredRuntimeConfig: { CopyCount: Number(count) } });
      setNote({ kind: 'status', text: `Asked for ${count} copies.` });
      onChange();
    } catch (error) {
      setNote({ kind: 'alert', text: error.message });
    }
  };
  const id = `copies-${name}`;
  return (
    <form class="inline" onSubmit={submit}>
      <label for={id} class="visually-hidden">Copies of {name}</label>
      <input id={id} type="number" min="0" step="1" required value={count} onInput={(e) => setCount(e.currentTarget.value)}
        onFocus={() => { editing.current = true; }} onBlur={() => { editing.current = false; }} />
      <button type="submit">Set</button>
      {note && <span role={note.kind} class={note.kind === 'alert' ? 'error' : 'muted'}>{note.text}</span>}
    </form>
  );
}
