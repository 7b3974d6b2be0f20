"""Phases C and D of the victim search (see ``search``): search again, from nothing, when the first order fails.

Rule 3's order decides every case it solves: these searches run only when it
found no plan, and only where what it took may be what barred the plan that
exists ("if no set makes room, evict nothing": otherwise evict). Each is a
whole search, pruned as the first is, so no plan evicts more than it needs.
"""

from __future__ import annotations

from .search import Failure, Plan, Search

MAX_RETRIES = 4  # phase D's searches again for one decision (each with phase C after it if need be): stays cheap


def _attempt(quota, cluster, preemptor, held: tuple, searches: list) -> Plan | None:
    """One search holding back ``held`` and, when its node stage fails after its quota stage took victims,
    phase C; every search run is appended to ``searches``."""
    search = Search(quota, cluster, preemptor, held=held)
    searches.append(search)
    plan = search.run()
    if plan is None and search.failure.stage == "node" and search.quota_victims:
        # Phase C: the victims phase A took for the quota may be what barred the ones that make room.
        again = Search(quota, cluster, preemptor, node_first=True, held=held)
        searches.append(again)
        plan = again.run()
    return plan


def find_victims(quota, cluster, preemptor) -> Plan | Failure:
    """A plan for ``preemptor`` (a ``units.Unit``), or why none was found (``Failure``; None: nothing to do)."""
    searches: list = []
    plan = _attempt(quota, cluster, preemptor, (), searches)
    if plan is not None:
        return plan
    # Phase D: a victim refused only because of victims taken before it on its side: hold those back
    # (with what that search held back), breadth first over the searches run, each set once.
    tried, retries, done = {()}, 0, 0
    while done < len(searches) and retries < MAX_RETRIES:
        search = searches[done]
        done += 1
        for _, before in search.blocked:
            held = {u.lead.uid: u for u in search.held + tuple(before)}
            key = tuple(sorted(held))
            if key in tried or retries >= MAX_RETRIES:
                continue
            tried.add(key)
            retries += 1
            plan = _attempt(quota, cluster, preemptor, tuple(held[uid] for uid in key), searches)
            if plan is not None:
                return plan
    return searches[0].failure  # the first search's: what it was short of is what wakes it (engine._parking)
