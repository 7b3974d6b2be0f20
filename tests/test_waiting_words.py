"""The waiting page's estimate and the admins' group notices, in words (issue 22): pure functions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hub_ext.service.wait_estimate import estimate, similar, waited
from spawner.team_notices import notice_lines
from spawner.waiting_words import estimate_words


def test_an_estimate_only_from_waits_that_were_waits_in_the_queue():
    assert estimate([]) == {"samples": 0}
    assert estimate([0.2, 1.0]) == {"samples": 0}  # admitted at the next turn of the loop: no wait seen
    assert estimate([60, 0.5, 120, 30]) == {"samples": 3, "medianSeconds": 60, "lowSeconds": 30, "highSeconds": 120}
    assert estimate([10.0] * 30)["samples"] == 20  # the most recent only


def test_a_wait_is_from_submission_to_the_first_admission_of_work_of_the_same_team_kind_and_size():
    pod = lambda at: SimpleNamespace(admitted_at=at)  # noqa: E731
    row = SimpleNamespace(id="a", namespace="team-b", kind="notebook", created=100.0, pods=[pod(None)],
                          spec={"resources": {"requests": {"cpu": "5"}}})
    assert waited(row) is None
    assert waited(SimpleNamespace(created=100.0, pods=[pod(190.0), pod(160.0)])) == 60.0
    same = SimpleNamespace(**{**vars(row), "id": "b"})
    assert similar(row, same) and not similar(row, row)
    assert not similar(row, SimpleNamespace(**{**vars(same), "spec": {"resources": {"requests": {"cpu": "10"}}}}))
    assert not similar(row, SimpleNamespace(**{**vars(same), "namespace": "team-a"}))
    assert not similar(row, SimpleNamespace(**{**vars(same), "kind": "training"}))


def test_the_estimate_in_words_says_plainly_when_there_is_none():
    assert estimate_words(None, "team-b", "Small") == ""  # the service could not be asked: nothing said
    assert estimate_words({"samples": 0}, "team-b", "Small") == (
        "No estimate of the wait yet: the service has seen none of team-b's servers like this one (Small) wait "
        "and then start.")
    one = {"samples": 1, "medianSeconds": 42, "lowSeconds": 42, "highSeconds": 42, "leafPosition": 1}
    assert estimate_words(one, "team-b", "Small") == (
        "The one earlier wait seen of team-b's servers like this one (Small) lasted 42 s.")
    many = {"samples": 4, "medianSeconds": 150, "lowSeconds": 30, "highSeconds": 600, "leafPosition": 3}
    assert estimate_words(many, "team-b", "") == (
        "The last 4 waits seen of team-b's servers like this one lasted 2 min 30 s in the middle, from 30 s to "
        "10 min. 2 of team-b's work are ahead of this one, so it may take longer.")


def test_admins_notices_name_the_group_the_property_and_the_fix():
    tenants = [
        {"group": "team-a", "errors": [], "fixes": [], "keptLastGood": False, "rejected": [], "rejectedFixes": []},
        {"group": "team-c", "errors": [], "fixes": [], "keptLastGood": True,
         "rejected": ["property tenancy.priority-classes: no PriorityClass named critcal-prod"],
         "rejectedFixes": ["List only existing classes."]},
        {"group": "team-x", "errors": ["property tenancy.role: must be researcher or admin"],
         "fixes": ["Set it to researcher."], "keptLastGood": False, "rejected": [], "rejectedFixes": []},
    ]
    lines = notice_lines(tenants)
    assert [(n["group"], n["kept"]) for n in lines] == [("team-c", True), ("team-x", False)]
    assert lines[0]["title"] == "Group team-c: its new properties were refused."
    assert lines[0]["text"] == ("Property tenancy.priority-classes: no PriorityClass named critcal-prod. Its members "
                                "keep its last good properties until this is fixed. List only existing classes.")
    assert lines[1]["text"].startswith("Property tenancy.role: must be researcher or admin. Its members cannot start")


@pytest.mark.asyncio
async def test_the_hub_homes_notices_are_the_last_answer_and_a_stale_one_is_asked_again():
    from spawner.team_notices import TeamNotices

    asked = []

    async def ask():
        asked.append(1)
        return [{"group": "team-c", "keptLastGood": True, "rejected": ["property x: wrong"], "rejectedFixes": ["Fix x."]}]

    notices = TeamNotices(max_age=60)
    assert notices.lines(ask) == []  # nothing known yet: asked in the background
    await notices._asking
    assert [n["group"] for n in notices.lines(ask)] == ["team-c"] and asked == [1]  # fresh: not asked again


def test_a_stop_to_make_room_names_the_person_and_their_work_not_the_pod():
    from spawner.waiting_words import stopped_for

    notice = {"time": 1.0, "by": "team-c/carol-takes", "byName": "carol's job carol-takes", "byTeam": "team-c",
              "message": "Reclaimed by team-c/carol-takes: its quota root.a.2 was borrowing and root.b.1 reclaimed "
                         "its guarantee"}
    assert stopped_for(notice) == ("carol's job carol-takes (team-c)",
                                   "Its quota root.a.2 was borrowing and root.b.1 reclaimed its guarantee.")
    # kept before the service named people: the pod's name, the message as it was
    older = {"time": 1.0, "by": "team-c/carol-takes", "message": "Reclaimed by team-c/carol-takes: its quota"}
    assert stopped_for(older) == ("team-c/carol-takes", "Reclaimed by team-c/carol-takes: its quota.")


def test_the_waiting_page_gives_only_the_advice_that_would_help():
    from spawner.waiting_words import waiting_status

    wl = {"tenant": "team-b", "reason": "quota-max", "message": "quota root.a.2 is at its max for cpu",
          "position": 3, "leafPosition": 2}
    status = waiting_status(wl, hub_home="/hub/home", pages="/services/tenancy/", fits=[], size="Small",
                            estimate={"samples": 0})
    assert status["position"] == "It is number 3 in the queue, 2 among team-b's work."
    assert status["estimate"].startswith("No estimate of the wait yet")
    texts = [t if isinstance(t, str) else t["text"] for t in status["todo"]]
    assert texts[1] == "Stop another server or job of team-b to make room sooner:"
    assert not any("start again with" in t for t in texts)  # no other profile would start now
    # a wait for the cluster (not the team's quota): no "stop something of team-b"; another profile would start
    status = waiting_status({**wl, "reason": "capacity"}, hub_home="/hub/home", pages="/p/", fits=["Small"],
                            size="Large", estimate=None)
    texts = [t if isinstance(t, str) else t["text"] for t in status["todo"]]
    assert not any("Stop another server" in t for t in texts) and "start again with Small" in texts[1]
    assert status["estimate"] == ""  # the service could not be asked: nothing said
    # room is being made: it starts in a moment, no estimate
    assert waiting_status({**wl, "reason": "waiting-for-eviction"}, hub_home="/", pages="/p/", fits=[], size="",
                          estimate={"samples": 0})["estimate"] == ""
