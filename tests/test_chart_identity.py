"""Issue 23: the chart's identity values render the hub's authenticator settings (helm template with
the Keycloak and LDAP examples in deploy/), the OAuth client secret only from a Secret."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from traitlets.config import Config

from test_chart_schema import errors

REPO = Path(__file__).resolve().parents[1]
HELM = Path(os.environ.get("TENANCY_HELM")
            or Path.home() / ".cache" / "jupyterhub-tenancy" / "helm-v3.22.0" / "bin" / "helm")


def rendered(values: Path) -> dict:
    if not HELM.exists():
        pytest.fail(f"helm missing at {HELM}: build it with tools/helm/build.sh", pytrace=False)
    out = subprocess.run([str(HELM), "template", "t", str(REPO / "helm"), "-f", str(values),
                          "--show-only", "templates/identity-configmap.yaml"], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "HELM_CACHE_HOME": "/tmp/tenancy-helm/cache",
                                          "HELM_CONFIG_HOME": "/tmp/tenancy-helm/config"})
    assert out.returncode == 0, out.stderr
    config = Config()
    text = yaml.safe_load(out.stdout)["data"]["identity_config.py"]
    os.environ["TENANCY_OAUTH_CLIENT_SECRET"] = "from-the-secret"
    exec(compile(text, "identity_config.py", "exec"), {"get_config": lambda: config})
    return config


def test_the_keycloak_example_renders_and_configures_the_authenticator():
    from hub_ext.identity.oauth import TenancyOAuthenticator

    config = rendered(REPO / "deploy" / "identity-keycloak-values.yaml")
    assert config.JupyterHub.authenticator_class == "hub_ext.identity.oauth.TenancyOAuthenticator"
    auth = TenancyOAuthenticator(config=config)
    assert auth.client_secret == "from-the-secret"
    assert auth.token_url == "https://keycloak.example.org/realms/tenancy/protocol/openid-connect/token"
    assert auth.manage_groups and auth.auth_state_groups_key == "oauth_user.groups"
    assert auth.map_groups(["data-science-beta", "marketing"]) == ["team-beta"]
    assert config.JupyterHub.template_vars.get_value({})["tenancy_contact"] == "the platform team (platform@example.org)"


def test_the_ldap_example_renders_and_configures_the_authenticator():
    from hub_ext.identity.ldap import TenancyLDAPAuthenticator

    auth = TenancyLDAPAuthenticator(config=rendered(REPO / "deploy" / "identity-ldap-values.yaml"))
    assert auth.server_address == "ldap.example.org" and auth.tls_strategy.name == "on_connect"
    assert auth.map_groups(["cn=data-science-alpha,ou=groups,dc=example,dc=org"]) == ["team-alpha"]


@pytest.mark.parametrize("override, where", [
    ({"identity": {"provider": "oidc", "oidc": {"issuer": "https://kc/realms/t", "callbackUrl": "https://h/cb",
                                                "clientSecret": {"value": "s3cret"}}}}, "$.identity.oidc.clientSecret"),
    ({"identity": {"provider": "oidc", "oidc": {"issuer": "https://kc/realms/t", "callbackUrl": "https://h/cb"}}},
     "$.identity.oidc.clientSecret.existingSecret"),
    ({"identity": {"groupMap": {"a": 3}}}, "$.identity.groupMap.a"),
], ids=["secret in values", "no secret", "bad target"])
def test_identity_mistakes_are_refused_at_their_key(override, where):
    assert where in [path for path, _ in errors(override)]
