"""The portal's own data: the models, the unit of work that commits each request, server sessions, the audit log."""
