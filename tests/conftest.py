"""Fixtures shared by the top-level tests. Kept small: the hub tier (tests/hub) and the
Kubernetes tier (tests/k8s) have their own conftest.py, and fixtures here are only made
when a test asks for them."""

from postgres import postgres_server, postgres_url  # noqa: F401 - fixtures
