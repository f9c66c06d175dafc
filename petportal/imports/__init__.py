"""Bulk adding animals from a CSV file: read and checked (files), kept (batches), each row claimed once (claims),
sent (runner), run outside the request (engines), and shown (views)."""
