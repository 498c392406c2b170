"""The attempt loop: one request sent to copies until one answers it, for every caller (the SageMaker and OpenAI
routes, shadow variants, asynchronous inference, batch transform's records).

What callers use, and nothing else of the package:
- `Call`: one request on its way to copies (its `Target`: the copies that may answer); `StreamEnded`: how a body
  that had begun stops short.
- `Forwarder`: what every request shares (admission, the HTTP client to copies, deadlines, `stop()`), one per gateway.
- `answer_of(forwarder, call)`: the `Answer` of a request (head, `read()`, `relay()`, `copy_id`, `error()`), for callers
  that hand the answer on as it came, whatever its status.
- `send_retried(forwarder, fresh, budget)`: for callers that retry on their own behalf (batch transform): the
  request sent again while a copy fails it, within its `RetryBudget`; `Declined` and `Spent` say how it ended
  without an answer. `NOT_TAKEN`: the errors of a request no copy did any work of, which a caller may ask again
  (asynchronous inference puts it back in its queue: its budget is no retry of a failure).

Inside: `attempt.py` decides, purely, what an attempt's reply means (next copy, the client's, broken) and what
becomes of a framed request whose copy died; `retry.py` decides, purely, what a caller with a budget does next
(which copies to avoid, retry or not, how long to back off). `answer.py` and `forward.py` run those decisions.
"""

from __future__ import annotations

from pier.runtime.attempts.answer import Answer, answer_of
from pier.runtime.attempts.call import Call, StreamEnded
from pier.runtime.attempts.forward import Forwarder, PathOn, admission_of
from pier.runtime.attempts.retry import NOT_TAKEN, Declined, RetryBudget, Spent, send_retried
from pier.runtime.target import Target

__all__ = ["NOT_TAKEN", "Answer", "Call", "Declined", "Forwarder", "PathOn", "RetryBudget", "Spent", "StreamEnded",
           "Target", "admission_of", "answer_of", "send_retried"]
