"""Fixtures shared by the top-level tests. Kept small: the hub tier (tests/hub) and the
Kubernetes tier (tests/k8s) have their own conftest.py, and fixtures here are only made
when a test asks for them."""

from postgres import postgres_server, postgres_url  # noqa: F401 - fixtures


def pytest_terminal_summary(terminalreporter):
    """The CPU this run used, its own and its finished children's (hubs, servers, control planes,
    builds): the suite is CPU-bound on a two-core machine, so CI's time follows these more than any
    one test's duration."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    terminalreporter.write_line(
        f"CPU used: {own.ru_utime + own.ru_stime:.0f} s by pytest itself, "
        f"{children.ru_utime + children.ru_stime:.0f} s by the processes it started and saw end")
