"""When supervision gives a copy up (pure): a host that cannot run it, the same crash twice, too many failed starts."""

from __future__ import annotations

import pytest

from pier.backends.supervisor import _Run, give_up_reason
from pier.channel.unservable import UNSERVABLE_EXIT

SEGV = "was killed by signal 11 (SIGSEGV)"


@pytest.mark.parametrize(("run", "failed_starts", "crashes", "reason"), [
    (_Run(None, "exited with code 1", 1), 1, [], None),
    (_Run(None, "exited with code 1", 1), 5, [], "gave up after 5 starts that never became ready; the last one "
                                                 "exited with code 1."),
    (_Run(None, f"exited with code {UNSERVABLE_EXIT}", UNSERVABLE_EXIT), 1, [],
     f"it cannot run on this host: the process exited with code {UNSERVABLE_EXIT} saying no CPU kernel family runs "
     "its model."),
    (_Run(None, SEGV, -11), 1, [SEGV], None),  # once may be chance
    (_Run(None, SEGV, -11), 2, [SEGV, SEGV], f"it {SEGV} while loading, 2 starts in a row: it would on every start "
                                             "(this host's CPU or the model file); not started again."),
    (_Run(None, SEGV, -11), 2, ["was killed by signal 4 (SIGILL)", SEGV], None),
    (_Run(120.0, SEGV, -11), 0, [], None),  # it served first: a crash under load is restarted as ever
])
def test_when_supervision_gives_up(run: _Run, failed_starts: int, crashes: list[str], reason: str | None) -> None:
    assert give_up_reason(run, failed_starts, crashes, max_failed_starts=5) == reason
