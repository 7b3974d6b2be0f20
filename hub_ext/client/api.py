"""Training jobs from notebooks and the command line: ``submit_training`` and the ``Job`` it gives back.

The calls themselves are the one client's (hub_ext.apiclient, standard library only, so
any kernel can use it); ``TenancyClient`` and ``TenancyError`` are named here too, where
notebooks have always imported them from.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..apiclient import FINAL, TenancyClient, TenancyError
from .datasets import data_choices
from .live import status_text


@dataclass
class Job:
    """A submitted training job; ``refresh()`` asks the service again.

    In a notebook it shows as one live status line (queued, running, done, with a link to
    its logs), updated in place until the job ends.
    """

    client: TenancyClient
    data: dict
    _shown_at: int | None = field(default=None, repr=False, compare=False)

    def show(self) -> None:
        """Display the live status line (in a notebook)."""
        from .live import LiveLine, execution_count

        self._shown_at = execution_count()
        LiveLine(self)

    def _ipython_display_(self):
        from .live import execution_count

        # submit_training() showed it in this very cell already: one line, not two.
        if self._shown_at is not None and self._shown_at == execution_count():
            return
        self.show()

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def state(self) -> str:
        return self.data["state"]

    def refresh(self) -> "Job":
        self.data = self.client.get(self.id)
        return self

    def status(self) -> str:
        """One line: state, and why it waits (with its queue position) if it does."""
        return status_text(self.refresh().data)

    def logs(self, pod: str | None = None) -> str:
        return self.client.logs(self.id, pod)

    def cancel(self) -> "Job":
        self.data = self.client.cancel(self.id)
        return self

    def wait(self, timeout: float | None = None, poll: float = 1.0) -> "Job":
        """Block until the job ends (or ``timeout`` seconds pass)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.refresh().state not in FINAL:
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(poll)
        return self

    def __repr__(self) -> str:
        return f"<Job {self.data.get('name')} ({self.id}): {self.state}>"


def submit_training(command=None, *, script: str | None = None, cpu=None, memory=None, gpu=None,
                    resources: dict | None = None, replicas: int = 1, priority_class: str | None = None,
                    tenant: str | None = None, name: str | None = None, env: dict | None = None,
                    client: TenancyClient | None = None, wait: bool = False, yes: bool = False,
                    show: bool | None = None, gang: bool | None = None, datasets: list | None = None,
                    wait_instead: bool = False, ask=None) -> Job:
    """Submit a training job from a notebook.

    ``command`` is a list (``["python", "train.py"]``) or a string run by the shell;
    or pass ``script=`` with Python source. Resources either as ``cpu=``/``memory=``/
    ``gpu=`` or as a Kubernetes-style ``resources={"requests": {...}, "limits": {...}}``.
    Jobs default to ``high-priority-research``; ``critical-prod`` only where your team allows it.
    With ``replicas > 1`` the pods are one gang (all start together or none does, as a DDP
    or MPI job needs); ``gang=False`` lets them start one by one.

    ``datasets`` names the datasets the job mounts, each ``"NAME"`` (at the dataset's own
    path), ``"NAME:PATH"`` (Arena's ``--data``) or ``{"name": NAME, "mountPath": PATH}``; the
    job waits until they are ready in its namespace. Not given: every dataset of the team
    that is ready. Inside the job, ``TENANCY_DATASETS`` maps each name to its path.

    If the job would stop anybody's work to make room (your own notebook servers, a
    colleague's notebook or job: the service's dry run says so), nothing is submitted and
    ``TenancyError`` says whose, and the lower priority at which it would stop nobody: pass
    ``yes=True`` to go ahead, or ``wait_instead=True`` to submit it at that lower priority
    (it then waits, or starts, without stopping anyone). ``ask(whose, lower)`` (a terminal's
    question) may decide instead: it returns ``"yes"``, ``"lower"`` or anything else (not
    submitted). In a notebook one live status line follows the job (``show=False``: none).
    """
    try:
        chosen = data_choices(datasets) if datasets is not None else None
    except ValueError as err:
        raise TenancyError(str(err)) from None
    client = client or TenancyClient()
    if isinstance(command, str):
        command = ["/bin/sh", "-c", command]
    requests = dict((resources or {}).get("requests", {}))
    for key, value in (("cpu", cpu), ("memory", memory), ("nvidia.com/gpu", gpu)):
        if value is not None:
            requests[key] = str(value)
    body = {
        "kind": "training", "command": command, "script": script, "replicas": replicas,
        "priorityClassName": priority_class, "tenant": tenant or os.environ.get("TENANCY_TENANT") or None,
        "name": name, "env": env, "gang": gang, "datasets": chosen,
        "resources": {"requests": requests, "limits": dict((resources or {}).get("limits", {}))},
    }
    if not yes:
        dry = client.dry_run(**body)
        whose = work_stopped(dry, client)
        lower = dry.get("lowerPriority")
        answer = ("lower" if wait_instead and lower else ask(whose, lower) if ask is not None else None) \
            if whose else "yes"
        if answer == "lower" and lower:
            body["priorityClassName"] = lower["priorityClassName"]
        elif answer is None:
            raise TenancyError(stop_question(whose, lower))
        elif answer != "yes":
            raise TenancyError("Not submitted: nobody's work was stopped.")
    job = Job(client, client.submit(**body))
    if show if show is not None else _in_a_kernel():
        job.show()
    return job.wait() if wait else job


def work_stopped(dry: dict, client: TenancyClient) -> str:
    """Whose work a dry run would stop, in people's words: the caller's own servers as
    ``own_servers_evicted`` names them, the caller's jobs, then everybody else's as the service
    names them ("bob's notebook (Large)")."""
    evictions = dry.get("evictions") or []
    if not evictions:
        return ""
    user = os.environ.get("JUPYTERHUB_USER") or client.me().get("name")
    names = [own_servers_evicted(dry, client)] if any(e.get("user") == user and e.get("kind") == "notebook"
                                                      for e in evictions) else []
    for e in evictions:
        if e.get("user") == user:
            if e.get("kind") == "notebook":
                continue  # named above
            name = f"your job {e.get('name')}"
        else:
            name = e.get("who") or f"{e.get('user') or 'someone'}'s {e.get('kind') or 'work'} {e.get('name')}"
        if name not in names:  # a gang's pods are one job
            names.append(name)
    return " and ".join(names)


def stop_question(whose: str, lower: dict | None) -> str:
    """The refusal a submission that would stop ``whose`` gets: what it would do, and the two ways on."""
    text = (f"This job would stop {whose} to make room, and unsaved work there would be lost. "
            "Submit it again with --yes (yes=True in Python) to go ahead anyway")
    if not lower:
        return text + "."
    pc = lower["priorityClassName"]
    if lower.get("state") == "Running":
        then = "it would start now"
    else:
        where = f" (position {lower['position']} in the queue)" if lower.get("position") else ""
        then = f"it would wait{where}" + (f": {lower['message']}" if lower.get("message") else "")
    return (text + f", or with --wait-instead (wait_instead=True) to submit it at {pc}, where it stops nobody "
            f"and {then}.")


def own_servers_evicted(dry: dict, client: TenancyClient) -> str:
    """``your server "gpu" (nb-alice-gpu)`` for each of the caller's own notebooks a dry run would evict."""
    user = os.environ.get("JUPYTERHUB_USER")
    victims = [e for e in dry.get("evictions") or [] if e.get("kind") == "notebook"]
    if user is None and victims:
        user = client.me().get("name")
    names = [(f'your server "{e["serverName"]}"' if e.get("serverName") else "your default server") + f" ({e['name']})"
             for e in victims if e.get("user") == user]
    return " and ".join(names)


def _in_a_kernel() -> bool:
    from .live import in_a_kernel

    return in_a_kernel()
