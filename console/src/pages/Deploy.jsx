import { useState } from 'preact/hooks';
import { send } from '../api.js';

const EXAMPLE = `endpoint: chat
instance_type: local
components:
  - name: chat-model
    model: {data: hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF/qwen2.5-0.5b-instruct-q4_k_m.gguf}
    copies: 1
    cpus: 1
    memory_mb: 1024
`;
const EVERY_MS = 2000;
const GIVE_UP_MS = 30 * 60 * 1000;

// POST /pier/deploy does what it can and says what it waits for; the same file is sent again until it waits for
// nothing (the gateway names models and configs after their content, so repeating changes nothing twice).
export function Deploy() {
  const [text, setText] = useState(EXAMPLE);
  const [steps, setSteps] = useState([]);
  const [state, setState] = useState({ busy: false, waiting: null, error: null, done: false });

  const deploy = async (event) => {
    event.preventDefault();
    setSteps([]);
    setState({ busy: true, waiting: null, error: null, done: false });
    const started = Date.now();
    try {
      for (;;) {
        const answer = await (await send('/pier/deploy', text, 'application/yaml')).json();
        setSteps((old) => [...old, ...answer.steps]);
        if (!answer.waiting) break;
        setState((s) => ({ ...s, waiting: answer.waiting }));
        if (Date.now() - started > GIVE_UP_MS) throw new Error(`Still waiting: ${answer.waiting}. See the Endpoints page.`);
        await new Promise((resolve) => setTimeout(resolve, EVERY_MS));
      }
      setState({ busy: false, waiting: null, error: null, done: true });
    } catch (error) {
      setState({ busy: false, waiting: null, error, done: false });
    }
  };

  const load = async (event) => {
    const file = event.currentTarget.files?.[0];
    if (file) setText(await file.text());
  };

  return (
    <section aria-labelledby="deploy-title">
      <h2 id="deploy-title">Deploy from a deploy file</h2>
      <p class="muted">The file <code>pier deploy</code> reads. Relative model paths are read from the gateway's working folder.</p>
      <form onSubmit={deploy}>
        <label class="block">Open a file <input type="file" accept=".yaml,.yml,text/yaml" onChange={load} /></label>
        <label class="block">Deploy file (YAML)
          <textarea rows="12" spellcheck={false} value={text} onInput={(e) => setText(e.currentTarget.value)} required /></label>
        <button type="submit" disabled={state.busy}>{state.busy ? 'Deploying…' : 'Deploy'}</button>
      </form>
      <ul aria-live="polite" class="steps">
        {steps.map((s, i) => <li key={i}>{s}</li>)}
      </ul>
      {state.waiting && <p role="status">Waiting: {state.waiting}…</p>}
      {state.done && <p role="status">Done: the endpoint is as the file says. Its copies start on the <a href="#/endpoints">Endpoints</a> page.</p>}
      {state.error && <p class="error" role="alert">{state.error.message}</p>}
    </section>
  );
}
