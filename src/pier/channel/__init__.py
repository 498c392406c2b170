"""The channel between the gateway and a copy: what each side may rely on of the other, beyond the public APIs.

Both sides import it (the model server answers by it; the runtime, the backends and a transform job's run call
by it); it imports nothing of pier but its settings reader, so it sits below all of them.

- `headers`: every X-Pier-* header, in one table (name, way, meaning).
- `copy_secret`: each copy gets a secret in its environment and answers only requests that carry it.
- `frames`: a resumable answer's frames (the client's bytes with the token ids behind them) and the
  continuation another copy is sent to go on from.
- `concurrency`: how many requests a copy takes at once, from its environment or its own word on /ping.
- `kernels`: the exit status of a copy whose model no CPU kernel family can run on its host.
- `prefix`: a request body's prompt as cumulative hashes of text blocks, computed alike by both sides.
- `kv_held`: the prefix blocks a copy's prefix cache holds, as it tells the gateway (KV_AWARE routing).
"""
