"""Bench-only: the portal with its templates' translation switched off (their English text as written, through
Jinja's null translations instead of Flask-Babel), to measure what translating a page costs."""

from petportal import create_app

app = create_app()
app.jinja_env.install_null_translations(newstyle=True)
