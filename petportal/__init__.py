"""Pet Portal: a server-rendered web portal over the Pet Store v1 API.

`create_app` is the table of contents: the settings (config.py), the request's way through the portal
(pipeline.py), the pages (one blueprint per area a user recognises) and the `flask` commands."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask

from petportal import config, pipeline
from petportal.account.views import bp as account
from petportal.admin.categories import bp as categories
from petportal.admin.users import bp as users
from petportal.admin.views import bp as admin
from petportal.auth.views import bp as auth
from petportal.catalog.views import bp as catalog
from petportal.i18n import template_text
from petportal.imports.promote import bp as promote
from petportal.imports.views import bp as imports
from petportal.running import commands, ops
from petportal.serving.request import page_context
from petportal.web import language_switch, readers

BLUEPRINTS = (catalog, imports, promote, auth, account, admin, users, categories, ops.bp, language_switch.bp)


def create_app(test_config: dict[str, Any] | None = None, *, demo: Mapping[str, Any] | None = None) -> Flask:
    """Build the portal; without `demo` (what a demo entry point started: running/demo.py), it needs a pet store."""
    app = Flask(
        __name__,
        template_folder=config.shipped_folder("templates"),
        static_folder=config.shipped_folder("static"),
        instance_path=config.INSTANCE_PATH,
    )
    # Each language's templates compiled apart (docs/performance.md, "template_text").
    app.jinja_environment = template_text.TranslatedEnvironment
    # No redirect from /a//b to /a/b: Werkzeug would build its Location, and its body, from the Host header.
    app.url_map.merge_slashes = False
    # Ids in paths are ASCII digits, read as the forms read them (an Arabic-Indic 1 names no animal).
    app.url_map.converters["int"] = readers.WholeNumberConverter
    settings = config.load(app.instance_path, test_config, demo)
    app.extensions[config.SETTINGS] = settings
    app.config.from_mapping(settings.flask_config())
    Path(app.instance_path).mkdir(parents=True, exist_ok=True)

    pipeline.build(app)
    for blueprint in BLUEPRINTS:
        app.register_blueprint(blueprint)
    app.context_processor(page_context)
    commands.register(app)
    return app
