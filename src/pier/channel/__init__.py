"""The channel between the gateway and a copy: what each side may rely on of the other, beyond the public APIs.

Both sides import it (the model server answers by it; the runtime, the backends and the transform runner call
by it); it imports nothing of pier, so it sits below all of them. Nothing of it reaches a client: the gateway
sets these headers itself and reads what comes back.

    header                 way       meaning                                               module
    X-Pier-Copy-Secret     request   the secret that makes a copy answer (PIER_COPY_SECRET) copy_secret
    X-Pier-Resumable       request   frame the answer, so the gateway can resume it        frames
    X-Pier-Continue        request   the body starts with N bytes of continuation JSON     frames
    X-Pier-Frames          response  the body is frames (head, state, tokens, data, ...)   frames
    X-Pier-Concurrency     response  on a ready copy's /ping: requests it takes at once    concurrency
    X-Pier-Refused         response  refused before any work: another copy may take it     refusal
    X-Pier-Timeout-Seconds request   the copy ends the request after this many seconds     deadline
    X-Pier-Kv-Held-Wanted  request   answer with X-Pier-Kv-Held (KV_AWARE routing)         kv_held
    X-Pier-Kv-Held         response  the prefix blocks the copy's prefix cache holds now   kv_held

- `copy_secret`: each copy gets a secret in its environment and answers only requests that carry it.
- `frames`: a resumable answer's frames (the client's bytes with the token ids behind them) and the
  continuation another copy is sent to go on from.
- `concurrency`: how many requests a copy takes at once, from its environment or its own word on /ping.
- `deadline`: how long a copy has for a request the gateway must answer within a client's timeout.
- `prefix`: a request body's prompt as cumulative hashes of text blocks, computed alike by both sides.
- `kv_held`: the prefix blocks a copy's prefix cache holds, as it tells the gateway (KV_AWARE routing).
- `refusal`: the header that tells a copy's refusal (it did nothing) from the request's own error.
"""
