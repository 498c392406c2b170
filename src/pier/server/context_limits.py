"""Per-request token limits (TGI's max_input_tokens and max_total_tokens) inside the shared KV budget."""

from __future__ import annotations

from dataclasses import dataclass

from pier.env import SettingsError
from pier.errors import ContextLengthExceeded, InputTooLong
from pier.server.settings import ServerSettings


@dataclass(frozen=True)
class Limits:
    max_input_tokens: int
    max_total_tokens: int  # prompt + generated tokens of one request

    @classmethod
    def resolve(cls, settings: ServerSettings, n_ctx: int) -> Limits:
        """TGI's defaults (max_total = the context, max_input = max_total - 1), checked against n_ctx."""
        total = settings.max_total_tokens or n_ctx
        if total > n_ctx:
            raise SettingsError(
                f"MAX_TOTAL_TOKENS ({total}) is larger than the KV budget of {n_ctx} tokens, so such a "
                "request could never run: lower MAX_TOTAL_TOKENS or raise MAX_BATCH_TOTAL_TOKENS."
            )
        max_input = settings.max_input_tokens or total - 1
        if max_input >= total:
            raise SettingsError(
                f"MAX_INPUT_TOKENS ({max_input}) must be less than MAX_TOTAL_TOKENS ({total}) to leave room "
                "for at least one generated token: lower MAX_INPUT_TOKENS."
            )
        return cls(max_input_tokens=max_input, max_total_tokens=total)

    def room(self, n_prompt: int) -> int:
        """Tokens a request may still generate after its prompt (at least 1, so errors report a real ask)."""
        return max(1, self.max_total_tokens - n_prompt)

    def check(self, n_prompt: int, max_new_tokens: int) -> None:
        """Raise in TGI's order: the total first, then the input alone."""
        if n_prompt + max_new_tokens > self.max_total_tokens:
            raise ContextLengthExceeded.requested(self.max_total_tokens, n_prompt, max_new_tokens,
                                                   max_prompt=self.max_input_tokens)
        if n_prompt > self.max_input_tokens:
            raise InputTooLong(
                f"This model's maximum input length is {self.max_input_tokens} tokens. However, your prompt "
                f"is {n_prompt} tokens. Please shorten the prompt (MAX_INPUT_TOKENS sets this limit).",
                prompt_tokens=n_prompt, max_tokens=max_new_tokens, limit=self.max_input_tokens,
            )
