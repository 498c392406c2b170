"""The engine step: continuous batching with chunked prefill and a shared prefix cache.

`EngineCore` is single-threaded and synchronous; `Engine` runs it on its own thread. One `step()`:
admit waiting requests (forking cached prefixes), plan the batch, decode it in one forward pass,
sample every sequence that produced logits, emit text and finish what is done.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import replace

import numpy as np

from pier.engine import continuation
from pier.engine.common_prefix import common_prefix
from pier.engine.detok import TextStream
from pier.engine.draft import Drafter
from pier.engine.engine_config import EngineConfig
from pier.engine.host_cache import HostCache
from pier.engine.isolation import Part, decode_apart
from pier.engine.kv_cache import KvCache
from pier.engine.logprobs import TokenLogprob, token_logprob
from pier.engine.prefix_cache import MIN_KEPT, MIN_SAVED, NO_MATCH, PrefixCache, PrefixMatch
from pier.engine.request import FinishReason, GenerateRequest, GenerationChunk
from pier.engine.retention import RetentionBudget
from pier.engine.runner import KvCacheFull, ModelRunner
from pier.engine.sampling import GrammarExhausted, TokenSampler
from pier.engine.scheduler import (
    ITL_BOUND,
    Work,
    allowance,
    holds_new,
    new_prompts,
    overtaken,
    plan,
    saturation_left,
)
from pier.engine.sequence import Emit, Sequence
from pier.engine.stats import EngineStats
from pier.engine.step_cost import StepCost
from pier.engine.step_output import ChunkExtra, ForwardPass, LogitRows
from pier.engine.step_times import StepTimes
from pier.engine.utf8_guard import Utf8Guard
from pier.engine.validate import CheckedRequest, checked
from pier.errors import InvalidRequest

log = logging.getLogger(__name__)

class EngineCore:
    def __init__(self, runner: ModelRunner, config: EngineConfig | None = None) -> None:
        self.runner = runner
        self.config = config or EngineConfig()
        self.step_tokens = min(self.config.step_tokens, runner.n_batch)  # llama_decode refuses more
        self.kv = KvCache(runner)
        host = HostCache(self.config.host_cache_bytes, MIN_SAVED) if self.config.host_cache_bytes > 0 else None
        self.prefix = PrefixCache(self.kv, self._retention_budget(), host)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._by_id: dict[str, Sequence] = {}
        self._eog = np.array([t for t in range(runner.info.n_vocab) if runner.is_eog(t)], dtype=np.int64)
        self._utf8: Utf8Guard | None = None  # built when a grammar first needs it, or by Engine.start's thread
        self._utf8_lock = threading.Lock()
        self.step_cost = StepCost(self.config.itl_bound or ITL_BOUND)
        self.step_times = StepTimes()
        self._saturated_for = 0  # steps the engine still counts as saturated (engine/scheduler.py)
        self._totals = {"prompt": 0, "cached": 0, "restored": 0, "generated": 0, "preemptions": 0, "steps": 0,
                        "drafted": 0, "draft_kept": 0}

    def _retention_budget(self) -> RetentionBudget | None:
        if not self.config.prefix_cache:
            return None
        floor = self.config.prefix_floor_cells
        return RetentionBudget(floor=self.kv.n_cells // 16 if floor is None else floor, ceiling=self.kv.n_cells)

    # -- intake (any thread: it only reads the vocabulary) ------------------------------------------

    def prepare(self, request: GenerateRequest | CheckedRequest, emit: Emit) -> Sequence:
        """Validate and tokenize (unless already checked); raises InvalidRequest / ContextLengthExceeded
        before any work."""
        ok = checked(request, self.runner)
        adapter = ok.request.adapter
        adapters = getattr(self.runner, "adapters", None)
        if adapter and (adapters is None or not adapters.has(adapter)):
            raise InvalidRequest(f"Adapter {adapter!r} is not loaded on this copy: load it first (PUT /pier/adapters).")
        grammar = ok.request.sampling.grammar is not None
        sampler = TokenSampler(ok.request.sampling, self.runner.info.n_vocab, self.runner.n_ctx,
                               self.runner.vocab if grammar else None)
        sampler.remember(ok.prompt_tokens)
        seq = Sequence(
            request=ok.request, tokens=list(ok.prompt_tokens), prompt_len=len(ok.prompt_tokens),
            max_tokens=ok.max_tokens, sampler=sampler, text=TextStream(ok.request.stop), emit=emit,
            drafter=Drafter() if self.config.speculate > 0 else None,
        )
        if ok.request.continuation:  # resumed from a copy that died (engine/continuation.py)
            seq.replay = continuation.replay(seq, ok.request.continuation, self.runner)
        return seq

    # -- engine thread -------------------------------------------------------------------------------

    def add(self, seq: Sequence) -> None:
        if seq.request_id in self._by_id:
            raise InvalidRequest(f"Request id {seq.request_id!r} is already in flight; use a unique id.")
        self._by_id[seq.request_id] = seq
        self.waiting.append(seq)
        if seq.replay is not None and not seq.replay_waits_for_logprobs:
            seq.emit(seq.replay)
            seq.replay = None

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def step(self) -> None:
        started = time.perf_counter()
        self._admit()
        work = self._schedule()
        if not work:
            return
        decoded = self._decode(work)
        if decoded is not None:
            logits, rows, forward = decoded
            self._sample(logits, rows)
            self.step_times.record(forward.decode_rows, forward.prompt_tokens, forward.seconds,
                                   time.perf_counter() - started)
        self._totals["steps"] += 1

    def abort(self, request_id: str) -> bool:
        """Cancel a request. Its sequence ends now; the KV it computed (every token of a completed step: commands
        are applied between steps) becomes an idle prefix like a finished one's, so a request that comes back
        with the same prompt pays only for the rest (a user who pressed stop, a client that read one token)."""
        seq = self._by_id.get(request_id)
        if seq is None:
            return False
        if seq in self.waiting:
            self.waiting.remove(seq)
        self._end(seq, FinishReason.ABORT, "", ())
        return True

    def fail_all(self, error: str) -> None:
        """The model failed: end every request with an error, and free their KV."""
        for seq in [*self.running, *self.waiting]:
            if seq in self.waiting:
                self.waiting.remove(seq)
            self._end(seq, FinishReason.ERROR, "", (), keep_prefix=False, error=error)

    def stats(self) -> EngineStats:
        t, host = self._totals, self.prefix.host
        return EngineStats(
            running=len(self.running), waiting=len(self.waiting), kv_cells_used=self.kv.used_cells,
            kv_cells_total=self.kv.n_cells, cached_prefixes=self.prefix.idle_count,
            prompt_tokens=t["prompt"], cached_prompt_tokens=t["cached"], generated_tokens=t["generated"],
            preemptions=t["preemptions"], steps=t["steps"],
            prefix_budget_cells=self.prefix.budget.cells if self.prefix.budget else 0,
            restored_prompt_tokens=t["restored"], host_cache_entries=len(host) if host is not None else 0,
            host_cache_bytes=host.nbytes if host is not None else 0, step_timer=self.step_times,
            drafted_tokens=t["drafted"], draft_kept_tokens=t["draft_kept"],
        )

    # -- admission -----------------------------------------------------------------------------------

    def _admit(self) -> None:
        while self.waiting and len(self.running) < self.config.max_running:
            seq = self.waiting[0]
            # a prompt's log-probabilities need logits at every position: none of it may come from the cache; nor
            # may a sequence that llama_decode failed on (`_failed`)
            fresh = seq.needs_every_logit or seq.failed_once
            match = NO_MATCH if fresh else self.prefix.match(seq.tokens, seq.request.adapter)
            if self._prefix_in_flight(seq, match):
                return
            if not self._fits(seq, match):
                if self.running or not self._fits(seq, NO_MATCH):
                    return  # wait for running sequences to finish and free cells
                match = NO_MATCH
            self.waiting.popleft()
            self._start(seq, match)

    def utf8_guard(self) -> Utf8Guard:
        """Built once (any thread; a second caller waits for the first)."""
        with self._utf8_lock:
            if self._utf8 is None:
                self._utf8 = Utf8Guard(self.runner)
            return self._utf8

    def _prefix_in_flight(self, seq: Sequence, match: PrefixMatch) -> bool:
        """Is another sequence computing a longer prefix of this prompt right now? Then this one waits for it (at
        most the rest of that prompt) instead of computing the same tokens twice. Only with the prefix cache on
        (nothing could be taken from it otherwise), and only for a shared prefix of MIN_KEPT tokens or more:
        unrelated prompts share their first few tokens (BOS, a chat template's opening), and waiting for those
        queued every new prompt behind every other one's prefill."""
        if not self.config.prefix_cache or not self.kv.memory.plain or seq.failed_once:
            return False  # a sliding window or a recurrent state may not keep that prefix (engine/model_memory.py)
        limit = len(seq.tokens) - 1
        for other in self.running:
            if other.pending > 1 and other.request.adapter == seq.request.adapter:
                shared = common_prefix(other.tokens, seq.tokens, limit)
                if shared > match.length and shared >= MIN_KEPT:
                    return True
        return False

    def _fits(self, seq: Sequence, match: PrefixMatch) -> bool:
        # Room for the new prompt plus one step of growth for everything already running.
        need = match.new_cells(len(seq.tokens)) + len(self.running) + 1
        return self.prefix.free_id(keep=match.slot) and self.prefix.make_room(need, keep=match.slot)

    def _start(self, seq: Sequence, match: PrefixMatch) -> None:
        seq.slot = self.kv.open()
        seq.slot.prompt_len = seq.prompt_len
        seq.slot.adapter = seq.request.adapter
        first = seq.scheduled is None  # not a re-admission after a preemption: count the cache hit once
        reused = self.prefix.adopt(match, seq.slot, seq.tokens if first else None)
        if first:
            seq.cached_n = reused
            self._totals["prompt"] += seq.prompt_len
            self._totals["cached"] += min(reused, seq.prompt_len)
            if match.saved is not None:  # a saved suffix's base was shared from the KV cache, not restored
                self._totals["restored"] += max(0, min(reused, seq.prompt_len) - match.saved.base)
        ahead = sum(s.pending for s in self.running if s.pending > 1)
        seq.slack = allowance(ahead + seq.pending)
        seq.admitted = time.perf_counter()
        self.running.append(seq)

    # -- scheduling and the forward pass -------------------------------------------------------------

    def _schedule(self) -> list[Work]:
        streams = sum(1 for s in self.running if s.pending == 1)
        cap = self.step_cost.prompt_cap(streams) if self.config.itl_bound is not None else None
        new = new_prompts([s.pending for s in self.running], [s.first_token for s in self.running],
                          [s.admitted for s in self.running])
        self._saturated_for = saturation_left(self._saturated_for, len(self.running) + len(self.waiting),
                                              self.config.max_running)
        saturated = self._saturated_for > 0
        budget = self.step_tokens
        if cap is not None and holds_new(streams, [s.pending for s in self.running], new, saturated) \
                and self.step_cost.stale(streams):
            budget = streams  # a probe: what decoding this many rows alone costs (engine/step_cost.py)
        while self.running:
            pending = [s.pending for s in self.running]
            work = plan(pending, budget, cap, [s.slack for s in self.running], new, saturated)
            if self.prefix.make_room(sum(w.n_tokens for w in work)) or len(self.running) == 1:
                for seq, charge in zip(self.running, overtaken(pending, work), strict=True):
                    seq.slack -= charge
                self._draft(work)
                return work
            self._preempt(self.running[-1])
        return []

    def _draft(self, work: list[Work]) -> None:
        """Give the step's generating sequences their drafts (engine/draft.py), within the step's token budget and
        the cells free without evicting a cached prefix for them; a draft never runs past a sequence's max_tokens."""
        if self.config.speculate <= 0 or self.kv.memory.recurrent:
            return  # off (the default; a recurrent state cannot take a rejected draft back): no step pays for looking
        planned = sum(w.n_tokens for w in work)
        room = min(self.step_tokens - planned, self.kv.free_cells - planned)
        for w in work:
            seq = self.running[w.index]
            seq.draft = []
            if seq.drafter is None or w.n_tokens != 1 or seq.pending != 1 or seq.needs_every_logit or room <= 0:
                continue
            seq.draft = seq.drafter.propose(seq.tokens, min(self.config.speculate, room,
                                                            seq.max_tokens - seq.n_generated - 1))
            room -= len(seq.draft)

    def _preempt(self, seq: Sequence) -> None:
        """Out of KV cells: the newest sequence gives its cells back and is recomputed later (its
        tokens so far become its prompt; sampler state and output stream carry on unchanged)."""
        assert seq.slot is not None
        self.kv.release(seq.slot)
        seq.slot = None
        self.running.remove(seq)
        self.waiting.appendleft(seq)
        self._totals["preemptions"] += 1

    def _decode(self, work: list[Work]) -> tuple[np.ndarray, list[LogitRows], ForwardPass] | None:
        """One forward pass; returns the logits, which rows belong to which sequence's positions, and what the
        pass carried and took. A sequence that makes llama_decode fail is run apart from the others
        (engine/isolation.py) and retried or failed alone (`_failed`)."""
        parts: dict[Part, Sequence] = {}
        now = time.perf_counter()
        for w in work:
            seq = self.running[w.index]
            assert seq.slot is not None
            start = seq.n_computed
            chunk = seq.tokens[start : start + w.n_tokens]
            if seq.draft:  # checked row by row in _sample
                chunk += seq.draft
            last = start + w.n_tokens == len(seq.tokens)
            every = (seq.needs_every_logit and start < len(seq.tokens) - 1) or bool(seq.draft)
            parts[Part(seq.slot.seq_id, start, chunk, last, every, seq.request.adapter)] = seq
            if seq.scheduled is None:
                seq.scheduled = now
        decode_rows = sum(1 for w in work if w.n_tokens == 1 and self.running[w.index].pending == 1)
        # drafted tokens count as prompt tokens: extra rows to compute
        prompt_tokens = sum(len(part.tokens) for part in parts) - decode_rows
        try:
            started = time.perf_counter()
            outcome = decode_apart(self.runner, list(parts), self.runner.info.n_vocab)
            forward = ForwardPass(decode_rows, prompt_tokens, time.perf_counter() - started)
        except KvCacheFull:
            # Our count said it fits but llama.cpp disagreed: free every cached prefix, then a sequence.
            if not self.prefix.idle_count:
                self._preempt(self.running[-1])
            self.prefix.clear()
            return None
        if not outcome.failed:
            self.step_cost.observe(decode_rows, prompt_tokens, forward.seconds)
        for part, error in outcome.failed:
            self._failed(parts[part], error)
        rows, first_row = [], 0
        for part in outcome.ran:
            seq = parts[part]
            assert seq.slot is not None
            self.kv.extend(seq.slot, part.tokens)
            if part.n_rows:
                rows.append(LogitRows(seq, part.start + len(part.tokens) - part.n_rows, first_row, part.n_rows))
            first_row += part.n_rows
        return outcome.logits, rows, forward

    def _failed(self, seq: Sequence, error: RuntimeError) -> None:
        """llama_decode failed on this sequence's rows alone. The first time, it is computed again from an empty
        slot (its KV, or a prefix it reused, may be what llama.cpp refused: output is unchanged, as after a
        preemption); the second time it ends with an error. The other sequences of the step went on either way."""
        if not seq.failed_once:
            log.warning("llama_decode failed on request %s (%s); computing it again without cached KV",
                        seq.request_id, error)
            seq.failed_once = True
            self._preempt(seq)
            return
        log.error("llama_decode failed on request %s again (%s); ending it", seq.request_id, error)
        self._end(seq, FinishReason.ERROR, "", (), keep_prefix=False,
                  error=f"the model could not compute this request ({error}); the requests beside it went on. "
                        "Retry it; if it fails again, shorten or change the prompt, and report it with the "
                        "copy's log")

    def _sample(self, logits: np.ndarray, outputs: list[LogitRows]) -> None:
        for out in outputs:
            seq = out.seq
            if seq.needs_every_logit:
                seq.record_prompt_logprobs(logits[out.first_row : out.first_row + out.n_rows], out.position)
            if seq.pending > 0:
                continue  # a prompt chunk: nothing to sample yet (a drafted sequence has fed more than it knows)
            if seq.replay is not None:  # a continuation's tokens, now with their log-probabilities
                seq.emit(replace(seq.replay, logprobs=tuple(seq.replay_logprobs or ()),
                                 prompt_logprobs=seq.take_prompt_logprobs()))
                seq.replay = None
            if seq.draft:
                self._verify(seq, logits[out.first_row : out.first_row + out.n_rows])
            else:
                self._next_token(seq, logits[out.first_row + out.n_rows - 1])

    def _next_token(self, seq: Sequence, raw: np.ndarray) -> int | None:
        """Sample and take the sequence's next token from its logits row; None when the sequence ended without one."""
        try:
            token = seq.sampler.sample(self._row(seq, raw))
        except GrammarExhausted:  # a finished grammar whose end min_tokens forbids: it ends here
            self._end(seq, FinishReason.STOP, seq.text.flush(), ())
            return None
        k = seq.request.logprobs
        logprob = None if k is None else token_logprob(raw, token, k, seq.request.sampling.logit_bias)
        self._accept(seq, token, logprob)
        return token

    def _verify(self, seq: Sequence, rows: np.ndarray) -> None:
        """A drafted sequence's rows: row i holds the model's next-token logits after its next token and the
        draft's first i tokens. Tokens are sampled from them one by one, exactly as step by step (the same
        sampler, in the same order), while each matches the draft: so the text is the one decoding without a draft
        writes, whatever the sampling. The cells of the draft tokens past the first mismatch are freed."""
        draft, seq.draft = seq.draft, []
        kept = 0
        for i, row in enumerate(rows):
            token = self._next_token(seq, row)
            if seq.slot is None or token is None or i == len(draft) or token != draft[i]:
                break
            kept += 1
        assert seq.drafter is not None
        seq.drafter.judge(len(draft), kept)
        self._totals["drafted"] += len(draft)
        self._totals["draft_kept"] += kept
        if seq.slot is not None:
            self.kv.truncate(seq.slot, len(seq.tokens) - 1)

    def _row(self, seq: Sequence, row: np.ndarray) -> np.ndarray:
        """Before min_tokens, no token that would end the request may be sampled (as in vLLM). Under a grammar,
        only tokens whose text the grammar reads as the output will have it (engine/utf8_guard.py)."""
        if seq.n_generated < seq.request.min_tokens:
            row = row.copy()
            row[self._eog] = -np.inf
            row[list(seq.request.stop_token_ids)] = -np.inf
        if seq.sampler.has_grammar:
            row = row.copy()
            refused = self.utf8_guard().refused(seq.text.pending_bytes)
            if seq.request.special_text:  # written as the text the grammar reads for them (a call's marker)
                refused = refused[~np.isin(refused, list(seq.request.special_text))]
            row[refused] = -np.inf
        return row

    # -- output --------------------------------------------------------------------------------------

    def _accept(self, seq: Sequence, token: int, logprob: TokenLogprob | None = None) -> None:
        seq.tokens.append(token)
        extra = ChunkExtra((logprob,) if logprob is not None else (), seq.take_prompt_logprobs())
        self._totals["generated"] += 1
        if seq.first_token is None:
            seq.first_token = time.perf_counter()
        request = seq.request
        may_stop = seq.n_generated > request.min_tokens
        if may_stop and (token in request.stop_token_ids or (not request.ignore_eos and self.runner.is_eog(token))):
            self._end(seq, FinishReason.STOP, seq.text.flush(), (token,), stop_reason=token, extra=extra)
            return
        delta = seq.text.push(request.special_text.get(token) or self.runner.piece(token), stops=may_stop)
        if delta.stop is not None:
            self._end(seq, FinishReason.STOP, delta.text, (token,), stop_reason=delta.stop, extra=extra)
        elif seq.n_generated >= seq.max_tokens:
            self._end(seq, FinishReason.LENGTH, delta.text + seq.text.flush(), (token,), extra=extra)
        else:
            seq.emit(GenerationChunk(seq.request_id, delta.text, (token,), prompt_tokens=seq.prompt_len,
                                     logprobs=extra.logprobs, prompt_logprobs=extra.prompt_logprobs))

    def _end(
        self, seq: Sequence, reason: FinishReason, text: str, tokens: tuple[int, ...], *,
        keep_prefix: bool = True, stop_reason: str | int | None = None, error: str | None = None,
        extra: ChunkExtra | None = None,
    ) -> None:
        if seq in self.running:
            self.running.remove(seq)
        if seq.slot is not None and keep_prefix:
            self.prefix.retire(seq.slot)
        elif seq.slot is not None:
            self.kv.release(seq.slot)
        seq.slot = None
        del self._by_id[seq.request_id]
        seq.sampler.close()
        seq.emit(GenerationChunk(
            seq.request_id, text, tokens, finish_reason=reason, stop_reason=stop_reason,
            timings=seq.timings(time.perf_counter()), error=error, prompt_tokens=seq.prompt_len,
            logprobs=extra.logprobs if extra else (), prompt_logprobs=extra.prompt_logprobs if extra else None,
        ))
