"""One file per schema change, oldest first: 0001 is the 0.1.0 schema."""
