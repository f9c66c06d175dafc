"""A certified OpenID Provider for the tests: the npm package `oidc-provider` (tests/oidc_provider.mjs), run on a real
port with the portal's client, another application's client and a few people. The single sign-on tests sign in
at it; the fuzz test configures its portals with it, so the sign-in routes run as they do in production."""

import json
import shutil
import subprocess
from contextlib import contextmanager

import requests
from joserfc import jwt
from joserfc.jwk import RSAKey

from petportal.running.processes import stop, wait_for_port

from support.portal import PROJECT_ROOT
from support.servers import free_port

PROVIDER_SCRIPT = PROJECT_ROOT / "tests" / "oidc_provider.mjs"
PROVIDER_PACKAGE = PROJECT_ROOT / "tests" / "node_modules" / "oidc-provider"
PORTAL = "http://localhost"
CALLBACK = f"{PORTAL}/login/sso/callback"
BACKCHANNEL_LOGOUT = "/login/sso/backchannel-logout"
CLIENT = {"client_id": "portal", "client_secret": "portal-secret", "redirect_uris": [CALLBACK]}
# Another application of the same company: its codes and tokens are not the portal's.
OTHER_CLIENT = {"client_id": "wiki", "client_secret": "wiki-secret", "redirect_uris": [CALLBACK]}
PEOPLE = {
    "kim-0001": {"preferred_username": "kim", "groups": ["pet-staff"]},
    "ada-0002": {"preferred_username": "ada", "groups": ["everyone", "pet-admins"]},
    "eve-0003": {"preferred_username": "eve", "groups": ["everyone"]},
    # Takes the name of the portal's own password admin: must never become that account.
    "mallory-0004": {"preferred_username": "admin", "groups": ["pet-staff"]},
}
MISSING = "node and tests/node_modules/oidc-provider are needed (npm ci --prefix tests)"


class Provider:
    """The running provider: its issuer URL, and who its people are (changeable between sign-ins)."""

    def __init__(self, issuer, settings_file):
        self.issuer = issuer
        self.settings_file = settings_file
        self.people = json.loads(json.dumps(PEOPLE))
        self.jwks_delay = 0
        # The key it signs with, given to it (read once, at its start), so a test can sign what it would not.
        self.key = RSAKey.generate_key(2048, parameters={"kid": "provider-key", "use": "sig", "alg": "RS256"})
        self.save()

    def save(self):
        settings = {"clients": [CLIENT, OTHER_CLIENT], "people": self.people, "jwks_delay": self.jwks_delay}
        settings["jwks"] = {"keys": [self.key.as_dict(private=True)]}
        self.settings_file.write_text(json.dumps(settings))

    def sign(self, claims):
        """`claims` as a token signed with the provider's own key: what a provider with a bug would send."""
        return jwt.encode({"alg": "RS256", "kid": "provider-key"}, claims, self.key)

    def jwks_requests(self):
        """How many times the provider's keys were asked for, by anyone, since it started."""
        return requests.get(f"{self.issuer}/jwks-requests", timeout=10).json()

    def set_groups(self, sub, groups):
        self.people[sub]["groups"] = groups
        self.save()

    def remove(self, sub, portal, client_id=CLIENT["client_id"]):
        """Remove `sub` from the provider's people, and have the provider send the client `client_id` their logout
        token (Back-Channel Logout) at the portal served at `portal`; the provider's answer (204: the portal took
        it)."""
        self.people.pop(sub, None)
        self.save()
        return requests.post(
            f"{self.issuer}/backchannel-logout",
            data={"sub": sub, "to": f"{portal}{BACKCHANNEL_LOGOUT}", "client_id": client_id},
            timeout=10,
        )


def available():
    return bool(shutil.which("node")) and PROVIDER_PACKAGE.is_dir()


@contextmanager
def running(folder):
    """The provider on a free port, its settings kept in `folder`."""
    port = free_port()
    provider = Provider(f"http://127.0.0.1:{port}", folder / "settings.json")
    process = subprocess.Popen(
        ["node", str(PROVIDER_SCRIPT), str(port), str(provider.settings_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield provider
    finally:
        stop([process])


def sign_in_settings(provider):
    """A portal's settings for staff and admins signing in at `provider` ("pet-staff" and "pet-admins" in `groups`),
    its people as they were at the start."""
    provider.people = json.loads(json.dumps(PEOPLE))
    provider.save()
    oidc = {
        "issuer": provider.issuer,
        "client_id": CLIENT["client_id"],
        "client_secret": CLIENT["client_secret"],
        "name": "Acme sign-in",
        "role_claim": "groups",
        "admin_values": frozenset({"pet-admins"}),
        "staff_values": frozenset({"pet-staff"}),
        "environments_claim": None,
        "session_max_age": None,
    }
    return {"PUBLIC_URL": PORTAL, "OIDC": oidc}
