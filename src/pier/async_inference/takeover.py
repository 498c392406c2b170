"""What a dispatcher that starts leading (a new leader after a kill, or a restarted gateway) does with each request
it finds in the queue, and with a request that ran before when its turn comes again. Together with the claims of the
queue (queue.py) and the owned writes of storage (`storage.write_once`), these keep each answer written once and each
notification sent at most once, wherever in a request's life its leader died:

    queued                                  it waits its turn
    running, nothing written                it waits again; its answer is looked for, none found, it runs
    running, the answer written, unmarked   it waits again; its answer is found (written for its id), so it is marked
                                            answered and notified without running
    answered, not notified                  it leaves the queue and is notified (a notification is sent only after the
                                            row is removed, by the one run that removed it)
    removed, the notification unsent        gone: that notification is lost (at most once, never twice)

A leader whose lease lapsed while a request ran cannot mark or remove it once the next leader has taken it (the
queue's claims), and the answer its late write puts at the OutputLocation is the one the next leader finds: two runs
of one request land one object (its S3 write is conditional)."""

from __future__ import annotations

RUN, FOUND = "run", "found"


def before_running(id: str, ran: bool, owner: str | None) -> str:
    """Whether a request about to run is RUN, or FOUND answered by an earlier run: only a request that ran before
    is looked for (`ran`), and only an answer written for its own id counts (`owner`: who wrote the object at its
    OutputLocation), since a Filename may name another caller's answer there."""
    return FOUND if ran and owner == id else RUN
