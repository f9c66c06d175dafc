"""Browsing, filtering, viewing and adding animals."""
