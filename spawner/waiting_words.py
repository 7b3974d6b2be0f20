"""The waiting page's estimate in words, from the service's ``workloads/{id}/estimate`` (what it has seen
of the team's earlier servers of the same size that had to wait), or that it cannot give one."""

from __future__ import annotations

from hub_ext.vocabulary import duration, sentence


def estimate_words(answer: dict | None, team: str, size: str) -> str:
    """``answer``: the service's estimate (None: it could not be asked: nothing is said). ``size``: the
    profile's name ("Small: 5 CPU, 4 GiB")."""
    if not answer:
        return ""
    servers = f"{team}'s servers like this one" + (f" ({size})" if size else "")
    n = answer.get("samples") or 0
    if not n:
        return f"No estimate of the wait yet: the service has seen none of {servers} wait and then start."
    ahead = (answer.get("leafPosition") or 1) - 1
    after = (f" {ahead} of {team}'s work {'is' if ahead == 1 else 'are'} ahead of this one, so it may take longer."
             if ahead > 0 else "")
    if n == 1:
        return f"The one earlier wait seen of {servers} lasted {duration(answer['medianSeconds'])}.{after}"
    return (f"The last {n} waits seen of {servers} lasted {duration(answer['medianSeconds'])} in the middle, from "
            f"{duration(answer['lowSeconds'])} to {duration(answer['highSeconds'])}.{after}")


def stopped_for(notice: dict) -> tuple[str, str]:
    """(whose work took the room, why) of a stop to make room (the spawner's kept notice): "carol's job
    train-3 (team-c)" and the reason without the pod's name the engine put first ("Reclaimed by
    team-c/train-3-0: its quota ..."); the pod's name only when the service did not name the person."""
    message = notice.get("message") or ""
    name = notice.get("byName") or ""
    if not name:
        return notice.get("by") or "", sentence(message)
    head, sep, rest = message.partition(": ")
    if sep and head.startswith(("Reclaimed by ", "Preempted by ")):
        message = rest
    team = notice.get("byTeam")
    return name + (f" ({team})" if team else ""), sentence(message)
