import { useEffect, useRef, useState } from 'preact/hooks';
import { getJson, listAll, send } from '../api.js';
import { payloads } from '../eventstream.js';
import { MODES, buildRequest, textOf } from '../requests.js';
import { boto3Snippet, curl, openaiSnippet } from '../snippets.js';
import { bytesOf, events, eventsOf } from '../sse.js';

// Which endpoint (and component) each OpenAI model name is: an admin key can look components up; an invoke key
// calls the name as an endpoint.
async function loadModels(admin) {
  const models = (await getJson('/v1/models')).data.map((m) => m.id);
  const owners = {};
  if (admin) {
    for (const c of await listAll('ListInferenceComponents', 'InferenceComponents')) owners[c.InferenceComponentName] = c.EndpointName;
  }
  // An endpoint that hosts components answers only through one of them: list the components, not it.
  const hosts = new Set(Object.values(owners));
  return models.filter((id) => !hosts.has(id))
    .map((id) => ({ id, target: owners[id] ? { endpoint: owners[id], component: id } : { endpoint: id } }));
}

const INITIAL = { mode: 'chat', system: '', prompt: '', maxTokens: '64', temperature: '0', topP: '1', seed: '', stream: true };

export function Playground({ admin }) {
  const [models, setModels] = useState(null);
  const [loadError, setLoadError] = useState(null);
  const [model, setModel] = useState('');
  const [form, setForm] = useState(INITIAL);
  const [messages, setMessages] = useState([]);
  const [answer, setAnswer] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const abort = useRef(null);

  useEffect(() => {
    loadModels(admin).then((list) => {
      setModels(list);
      setModel((m) => m || list[0]?.id || '');
    }, setLoadError);
  }, [admin]);

  const set = (field) => (e) => setForm({ ...form, [field]: e.currentTarget.type === 'checkbox' ? e.currentTarget.checked : e.currentTarget.value });
  const target = models?.find((m) => m.id === model)?.target || { endpoint: model };
  const pending = form.mode === 'chat' ? [...messages, ...(form.prompt ? [{ role: 'user', content: form.prompt }] : [])] : messages;
  const full = { ...form, model, target, messages: pending };
  const request = buildRequest(full);
  const origin = location.origin;

  const run = async (event) => {
    event.preventDefault();
    if (!model || !form.prompt) return;
    setBusy(true);
    setError(null);
    setAnswer('');
    const controller = new AbortController();
    abort.current = controller;
    let text = '';
    try {
      const response = await send(request.path, request.body, 'application/json', controller.signal, request.headers);
      if (form.stream) {
        const stream = form.mode === 'tgi' ? eventsOf(payloads(bytesOf(response))) : events(response);
        for await (const chunk of stream) {
          text += textOf(form.mode, chunk);
          setAnswer(text);
        }
      } else {
        text = textOf(form.mode, await response.json());
        setAnswer(text);
      }
      if (form.mode === 'chat') {
        setMessages([...pending, { role: 'assistant', content: text }]);
        setAnswer('');
        setForm((f) => ({ ...f, prompt: '' }));
      }
    } catch (e) {
      if (e.name !== 'AbortError') setError(e);
    } finally {
      setBusy(false);
      abort.current = null;
    }
  };

  return (
    <section aria-labelledby="playground-title">
      <h2 id="playground-title">Playground</h2>
      {loadError && <p class="error" role="alert">Could not list models: {loadError.message}</p>}
      {models && models.length === 0 && <p>No endpoint is in service yet.</p>}
      <form class="playground" onSubmit={run}>
        <div class="fields">
          <Field id="pg-model" label="Model"><select id="pg-model" value={model} onChange={(e) => setModel(e.currentTarget.value)}>
            {(models || []).map((m) => <option key={m.id} value={m.id}>{m.id}</option>)}
          </select></Field>
          <Field id="pg-api" label="API"><select id="pg-api" value={form.mode} onChange={set('mode')}>
            {MODES.map((m) => <option key={m.id} value={m.id}>{m.label}</option>)}
          </select></Field>
          <Field id="pg-max" label="Max tokens"><input id="pg-max" type="number" min="1" value={form.maxTokens} onInput={set('maxTokens')} /></Field>
          <Field id="pg-temp" label="Temperature"><input id="pg-temp" type="number" min="0" max="2" step="0.1" value={form.temperature} onInput={set('temperature')} /></Field>
          <Field id="pg-top-p" label="Top p"><input id="pg-top-p" type="number" min="0" max="1" step="0.05" value={form.topP} onInput={set('topP')} /></Field>
          <Field id="pg-seed" label="Seed"><input id="pg-seed" type="number" value={form.seed} onInput={set('seed')} /></Field>
          <label class="check"><input type="checkbox" checked={form.stream} onChange={set('stream')} /> Stream</label>
        </div>
        {form.mode === 'chat' && (
          <>
            <label class="block" for="pg-system">System prompt</label>
            <textarea id="pg-system" rows="2" value={form.system} onInput={set('system')} />
            <ol class="chat" aria-label="Conversation">
              {messages.map((m, i) => <li key={i} class={m.role}><strong>{m.role}</strong> {m.content}</li>)}
              {busy && <li class="assistant"><strong>assistant</strong> <span class="answer">{answer}</span></li>}
            </ol>
          </>
        )}
        <label class="block" for="pg-prompt">{form.mode === 'chat' ? 'Message' : 'Prompt'}</label>
        <textarea id="pg-prompt" rows="3" value={form.prompt} onInput={set('prompt')} required />
        <div class="actions">
          <button type="submit" disabled={busy || !model}>{busy ? 'Generating…' : 'Send'}</button>
          {busy && <button type="button" onClick={() => abort.current?.abort()}>Stop</button>}
          {form.mode === 'chat' && messages.length > 0 && <button type="button" disabled={busy} onClick={() => setMessages([])}>New chat</button>}
        </div>
      </form>
      {error && <p class="error" role="alert">{error.message}</p>}
      {form.mode !== 'chat' && (answer || busy) && (
        <div class="card"><h3>Answer</h3><pre class="answer" aria-live="polite">{answer}</pre></div>
      )}
      <details>
        <summary>Raw request</summary>
        <pre>{`POST ${request.path}\n${Object.entries(request.headers).map(([k, v]) => `${k}: ${v}\n`).join('')}\n${JSON.stringify(request.body, null, 2)}`}</pre>
      </details>
      <details>
        <summary>curl</summary>
        <pre>{curl(origin, request)}</pre>
      </details>
      {form.mode !== 'tgi' && (
        <details>
          <summary>openai (Python)</summary>
          <pre>{openaiSnippet(origin, full, request)}</pre>
        </details>
      )}
      <details>
        <summary>boto3 (Python)</summary>
        <pre>{boto3Snippet(origin, full, request)}</pre>
      </details>
    </section>
  );
}

function Field({ id, label, children }) {
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children}
    </div>
  );
}
