"""The words of a server's wait and stop: the waiting page's status (why, its place, the estimate from the
service's ``workloads/{id}/estimate``, only the advice that would help), and whose work a stop made room for."""

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


def waiting_status(wl: dict, *, hub_home: str, pages: str, fits: list[str], size: str, estimate: dict | None) -> dict:
    """The waiting page's status (spawn-pending.js shows it) for the server's workload ``wl``: ``fits``, the
    team's other profiles that would start now; ``estimate``, the service's answer (None: not asked)."""
    team = wl.get("tenant") or "your team"
    reason = wl.get("reason")
    if reason == "waiting-for-eviction":
        headline, state = "Room is being made for this server; it starts in a moment.", "starting"
    else:
        headline, state = "This server is waiting for room in the cluster.", "waiting"
    position = (f"It is number {wl['position']} in the queue, {wl.get('leafPosition')} among {team}'s work."
                if wl.get("position") else "")
    todo = ["Wait here: the server starts by itself as soon as there is room, and this page follows it."]
    if reason in ("quota-max", "quota-min"):
        # Where to do it, not only what: the hub home stops one's servers, the Jobs page cancels and stops.
        todo.append({"text": f"Stop another server or job of {team} to make room sooner:",
                     "links": [{"href": hub_home, "text": "your servers"},
                               {"href": pages + "jobs", "text": "your work on the Jobs page (Cancel…, Stop…)"}]})
    if fits:  # only when another profile of the team would start now; "a smaller profile" helped nobody else
        todo.append(f"Or press Stop and start again with {' or '.join(fits)}: it would start now.")
    todo.append("The dashboard shows the team's quota and the queue.")
    return {"state": state, "headline": headline, "reason": sentence(wl.get("message") or "Queued"),
            "position": position, "estimate": estimate_words(estimate, team, size) if state == "waiting" else "",
            "todo": todo, "dashboard": pages + "quota"}
