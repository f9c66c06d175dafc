"""The side-by-side benchmark: `python -m bench` (see README, "Performance")."""
