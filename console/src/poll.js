import { useEffect, useRef, useState } from 'preact/hooks';

// Call `load` now and every `ms` while the page is shown; {value, error, reload}. A slow answer never overlaps the
// next call.
export function usePoll(load, ms, deps = []) {
  const [state, setState] = useState({ value: undefined, error: null });
  const tick = useRef(0);
  const [nonce, setNonce] = useState(0);
  useEffect(() => {
    let stopped = false;
    let timer;
    const run = async () => {
      const mine = ++tick.current;
      try {
        const value = await load();
        if (!stopped && mine === tick.current) setState({ value, error: null });
      } catch (error) {
        if (!stopped && mine === tick.current) setState((s) => ({ value: s.value, error }));
      }
      if (!stopped && ms) timer = setTimeout(run, ms);
    };
    run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, nonce]);
  return { ...state, reload: () => setNonce((n) => n + 1) };
}
