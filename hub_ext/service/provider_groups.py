"""What the identity provider sent that gave no team, for the Tenants page: read from the hub's users.

At each login the authenticator (``hub_ext/auth.py``) leaves in the user's ``user_info["tenancy"]``
the provider's groups, those that map to no team and why (``noTeam``), and the claim path when the
provider's answer had no groups claim (``groupsClaimMissing``). The hub gives ``user_info`` with
``read:users:name``, which the service holds already. Each entry is the user's last login.
"""

from __future__ import annotations


def unmapped(users: list[dict]) -> dict:
    """``{"groups": [{"group", "why", "users"}], "claimMissing": [{"user", "claim"}], "unread": None}``
    from the hub's user models, sorted by group and user (``unread``: why they could not be read)."""
    groups: dict[tuple[str, str], list[str]] = {}
    missing = []
    for model in users:
        record = (model.get("user_info") or {}).get("tenancy") or {}
        name = model.get("name", "")
        for group, why in (record.get("noTeam") or {}).items():
            groups.setdefault((str(group), str(why)), []).append(name)
        if record.get("groupsClaimMissing"):
            missing.append({"user": name, "claim": str(record["groupsClaimMissing"])})
    return {"groups": [{"group": g, "why": why, "users": sorted(names)} for (g, why), names in sorted(groups.items())],
            "claimMissing": sorted(missing, key=lambda m: m["user"]), "unread": None}
