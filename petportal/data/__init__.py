"""The portal's own data: the models, the unit of work that commits each request once, server-side sessions and
the audit log."""
