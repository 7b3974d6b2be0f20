"""The tenants of a ``KubernetesBackend``, provisioned on the cluster (with ``provision`` on).

The service hands over its tenants (built from hub groups) whenever they change;
they are provisioned then (``provision.Provisioner``: Namespace, RBAC,
ResourceQuota, LimitRange, PriorityClasses), and again every
``provision_interval_seconds`` to repair drift. One reconcile runs at a time.
"""

from __future__ import annotations

import asyncio

from traitlets import TraitError

from ...quota.errors import ValidationError
from .provision import Provisioner


class Tenants:
    """The tenants last handed to the backend, and their provisioning."""

    def __init__(self, backend):
        self.backend = backend  # its configuration, API and controller
        self.known = None  # the tenants last handed to tenants_changed (None: not known yet)
        self.key = None  # what they were when last provisioned
        self.provisioner: Provisioner | None = None
        if backend.provision:  # built now: a bad c.Provisioner.* option stops the start, in one line
            try:
                self.provisioner = Provisioner(api_client=backend.api.api_client, parent=backend)
            except TraitError as err:
                raise ValidationError(f"Provisioner: {' '.join(str(err).split())}") from None
        self.lock = asyncio.Lock()
        self.provisioned = None  # the last ProvisionResult

    def changed(self, tenants) -> None:
        """Keep the tenants; provision them when they changed (``provision`` on, and serving)."""
        self.known = list(tenants)
        key = tuple(sorted(repr(t.to_dict()) for t in tenants))
        if not self.backend.provision or key == self.key:
            return
        self.key = key
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # not serving (a dry run): nothing to do on the cluster
        self.backend.controller._spawn(self.provision_now(tenants))

    async def provision_now(self, tenants=None):
        """Reconcile the tenants (default: the last known) on the cluster now; the ``ProvisionResult``,
        or None while the tenants are not known (the hub not read yet: provisioning ``[]`` would
        delete every tenant's objects)."""
        if self.provisioner is None:
            self.provisioner = Provisioner(api_client=self.backend.api.api_client, parent=self.backend)
        tenants = self.known if tenants is None else list(tenants)
        if tenants is None:
            return None
        async with self.lock:
            self.provisioned = await self.provisioner.reconcile_async(tenants)
        return self.provisioned

    async def repair(self) -> None:
        """Provision again (drift repair), logging a failure: it is retried next time."""
        try:
            await self.provision_now()
        except Exception:  # noqa: BLE001 - drift repair is retried next time
            self.backend.log.exception("tenancy provisioning failed")
