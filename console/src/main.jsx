import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiKey, getJson, role as roleOf, setApiKey } from './api.js';
import { Bench } from './pages/Bench.jsx';
import { Charts } from './pages/Charts.jsx';
import { Copies } from './pages/Copies.jsx';
import { Deploy } from './pages/Deploy.jsx';
import { Endpoints } from './pages/Endpoints.jsx';
import { Playground } from './pages/Playground.jsx';
import { usePoll } from './poll.js';
import './style.css';

// Pages, and who sees them: an invoke-only key sees what it may use (the gateway refuses the rest anyway).
const PAGES = [
  { id: 'endpoints', label: 'Endpoints', admin: true, view: Endpoints },
  { id: 'copies', label: 'Copies', admin: true, view: Copies },
  { id: 'charts', label: 'Live charts', admin: true, view: Charts },
  { id: 'playground', label: 'Playground', admin: false, view: Playground },
  { id: 'deploy', label: 'Deploy', admin: true, view: Deploy },
  { id: 'bench', label: 'Bench results', admin: false, view: Bench },
];

function useHash() {
  const read = () => decodeURIComponent(location.hash.replace(/^#\/?/, ''));
  const [hash, setHash] = useState(read());
  useEffect(() => {
    const changed = () => setHash(read());
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return hash;
}

// The hash names the page, so the skip link moves the focus itself instead of changing the hash.
function skipToMain(event) {
  event.preventDefault();
  document.getElementById('main').focus();
}

function KeyForm({ access, onKey }) {
  const [value, setValue] = useState('');
  const submit = (event) => {
    event.preventDefault();
    onKey(value.trim());
    setValue('');
  };
  return (
    <form class="key" onSubmit={submit} aria-label="Access">
      <label for="api-key">API key</label>
      <input id="api-key" type="password" autocomplete="off" value={value} placeholder={apiKey() ? 'key set for this tab' : 'pier_…'}
        onInput={(e) => setValue(e.currentTarget.value)} />
      <button type="submit">Use key</button>
      {apiKey() && <button type="button" onClick={() => onKey('')}>Forget key</button>}
      <span class="role" role="status">{access ? `access: ${access.role}` : 'checking access…'}</span>
    </form>
  );
}

// Which gateway this is among several on one state database (GET /pier): the leader runs the loops, a follower
// serves the same API. A gateway alone on its state folder always leads, and says nothing.
function GatewayRole() {
  const { value } = usePoll(() => getJson('/pier'), 5000);
  if (!value || value.state !== 'postgresql') return null;
  const text = value.role === 'leader'
    ? 'this gateway leads'
    : `follower; ${value.leader ? `leader: ${value.leader}` : 'no leader yet'}`;
  return <span class="gateway-role" role="status" title={`this gateway: ${value.gateway}`}>{text}</span>;
}

function App() {
  const hash = useHash();
  const [access, setAccess] = useState(null);
  const [keyVersion, setKeyVersion] = useState(0);
  useEffect(() => {
    setAccess(null);
    roleOf().then(setAccess);
  }, [keyVersion]);

  const admin = access?.role === 'admin';
  const visible = PAGES.filter((p) => admin || !p.admin);
  const [pageId, ...rest] = hash.split('/');
  const page = visible.find((p) => p.id === pageId) || visible.find((p) => p.id === (admin ? 'endpoints' : 'playground'));
  const onKey = (key) => {
    setApiKey(key);
    setKeyVersion((v) => v + 1);
  };

  return (
    <>
      <a class="skip" href="#main" onClick={skipToMain}>Skip to content</a>
      <header>
        <h1>pier</h1>
        <nav aria-label="Console pages">
          <ul>
            {visible.map((p) => (
              <li key={p.id}>
                <a href={`#/${p.id}`} aria-current={p === page ? 'page' : undefined}>{p.label}</a>
              </li>
            ))}
          </ul>
        </nav>
        <GatewayRole />
        <KeyForm access={access} onKey={onKey} />
      </header>
      <main id="main" tabindex="-1">
        {access === null && <p role="status">Checking what this key may do…</p>}
        {access?.role === 'none' && (
          <div class="error" role="alert">
            <p>The gateway refused the console: {access.reason}</p>
            <p>Paste an API key above (<code>pier keys create NAME --role admin</code> makes one; an invoke key opens the playground only).</p>
          </div>
        )}
        {access && access.role !== 'none' && page && <page.view key={`${page.id}-${keyVersion}`} admin={admin} path={rest} />}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app'));
