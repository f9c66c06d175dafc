"""What the tests share and do not test: secrets, configuration and form helpers (helpers.py), real and faulty
servers (servers.py), a portal readied and driven from outside (portal.py), the secret scan and the figures
(scanning.py, a pytest plugin), the OpenID Provider (openid_provider.py), Chromium (browsers.py), a software
passkey authenticator (authenticator.py) and a portal with one more page (environ_app.py).

Imported as `support.<module>`: pytest puts tests/ on the path (the rootdir conftest.py's folder)."""
