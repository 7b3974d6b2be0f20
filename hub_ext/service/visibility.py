"""What a user sees of other teams' work: the one rule of the pages (see ``history.visible``).

A user sees every team's totals, but no other team's people or servers: in the reclaim table a
victim of another team is "a training job of team-b", and a preemptor of another team is its team
("team-c"), in the table and in the sentence that says why. Admins see everything.
"""

from __future__ import annotations

import re

KINDS = {"training": "a training job", "notebook": "a notebook"}


def _team_of(namespace: str, teams: dict[str, str]) -> str:
    return teams.get(namespace, "another team")


def evictions_seen(log: list[dict], who, teams: dict[str, str]) -> list[dict]:
    """``log`` (``tree_edit.evictions_log``) as ``who`` may see it; ``teams``: namespace -> team."""
    if who.admin:
        return log
    mine = set(who.namespaces() or [])
    out = []
    for entry in log:
        entry = dict(entry)
        victim = entry.get("victim") or {}
        message = entry.get("message") or ""
        if victim.get("namespace") not in mine:
            team = victim.get("team") or _team_of(victim.get("namespace", ""), teams)
            entry["victim"] = {"team": team, "kind": victim.get("kind"), "namespace": victim.get("namespace"),
                               "workload": None, "name": None, "user": None,
                               "said": f"{KINDS.get(victim.get('kind'), 'work')} of {team}"}
        preemptor = entry.get("preemptor") or ""
        namespace = preemptor.split("/")[0]
        if preemptor and namespace not in mine:
            team = _team_of(namespace, teams)
            entry["preemptor"] = team
            # "Reclaimed by team-c/carol-train (gang g): ..." names their server (and gang): say the team.
            message = re.sub(re.escape(preemptor) + r"( \(gang [^)]*\))?", f"work of {team}", message)
        if victim.get("namespace") not in mine:
            message = re.sub(r"; the whole gang \S+ goes", "; its whole gang goes", message)
        entry["message"] = message
        out.append(entry)
    return out
