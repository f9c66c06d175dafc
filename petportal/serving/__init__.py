"""Who is served which environment: the active choice everyone is served from and its switch (choice), and what
serves one request, with an admin's preview and an account limited to one environment (request)."""
