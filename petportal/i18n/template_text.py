"""How templates translate: `_`, `gettext` and `ngettext`, and each language's templates compiled apart.

Each language gets its own compiled copy of every template (`TranslatedEnvironment`), in which a message written
out (`_('Log in')`) is translated once, when compiled; only its values, if any, are put in as the page is drawn.
A plural whose count is known only then goes through the page's catalog (`TemplateText`). Either way a message
is the catalog's text with its named values escaped into it, as Jinja's "newstyle" gettext does.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

from babel.support import NullTranslations
from flask import has_request_context
from flask.templating import Environment
from flask_babel import force_locale, get_locale, get_translations
from jinja2 import Template, nodes
from jinja2.visitor import NodeTransformer
from markupsafe import Markup

from petportal.i18n.lazy_text import translations

# Compiled templates kept per language (Jinja's own default for an environment).
TEMPLATES_PER_LANGUAGE = 400


class TemplateText:
    """The `_`, `gettext` and `ngettext` of templates over one catalog; `ngettext` also offers its count as `num`.

    They are plain functions, not Jinja's context functions: Jinja copies a template's variables into a new
    context for each call of one of those inside a block that sets variables, many times on the list page
    (docs/performance.md, "template_text"). Each page gets them bound to its catalog (`page_text`);
    a macro imported without the page's context reaches the globals, which look the catalog up per message."""

    __slots__ = ("catalog",)

    def __init__(self, catalog: NullTranslations) -> None:
        self.catalog = catalog

    def gettext(self, message: str, **variables: object) -> Markup:
        return Markup(self.catalog.ugettext(message)) % variables

    def ngettext(self, singular: str, plural: str, count: int, **variables: object) -> Markup:
        variables.setdefault("num", count)
        return Markup(self.catalog.ungettext(singular, plural, count)) % variables


def gettext(message: str, **variables: object) -> Markup:
    return TemplateText(translations()).gettext(message, **variables)


def ngettext(singular: str, plural: str, count: int, **variables: object) -> Markup:
    return TemplateText(translations()).ngettext(singular, plural, count, **variables)


def page_text() -> dict[str, Callable[..., Markup]]:
    """The page's own `_`, `gettext` and `ngettext`, bound to its language's catalog once."""
    text = TemplateText(translations())
    return {"_": text.gettext, "gettext": text.gettext, "ngettext": text.ngettext}


class TranslatedEnvironment(Environment):
    """Flask's template environment, with one linked copy per language (`in_language`) that compiles its
    templates with their messages already translated (`_Translate`). A page drawn in a request is drawn from
    its language's copy; a template drawn outside one (a command) is translated as it is drawn."""

    language: str | None = None

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        self.languages: dict[str, TranslatedEnvironment] = {}

    def in_language(self, language: str) -> TranslatedEnvironment:
        """This environment's copy for `language`: its own cache of compiled templates, all else shared."""
        linked = self.languages.get(language)
        if linked is None:
            linked = self.overlay(cache_size=TEMPLATES_PER_LANGUAGE)
            linked.language = language
            self.languages[language] = linked
        return linked

    def get_template(
        self, name: str | Template, parent: str | None = None, globals: MutableMapping[str, object] | None = None
    ) -> Template:
        if self.language is None and has_request_context():
            return self.in_language(str(get_locale())).get_template(name, parent, globals)
        return super().get_template(name, parent, globals)

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        if self.language is None:
            return tree
        with force_locale(self.language):
            catalog = get_translations()
        # The names the template assigns (`{% set _ = ... %}`, a loop's variable): a call of one of those is no message.
        assigned = {node.name for node in tree.find_all(nodes.Name) if node.ctx in ("store", "param")}
        translated: nodes.Template = _Translate(TemplateText(catalog), assigned).visit(tree)
        translated.set_environment(self)
        return translated


class _Translate(NodeTransformer):
    """Rewrites each call of `_`, `gettext` or `ngettext` whose message is written out into its translated text
    (with `%` for values known only as the page is drawn); a plural whose count is a variable stays a call."""

    def __init__(self, text: TemplateText, assigned: set[str]) -> None:
        self.text = text
        self.assigned = assigned

    def visit_Call(self, node: nodes.Call) -> nodes.Node:
        self.generic_visit(node)
        called = node.node
        if not isinstance(called, nodes.Name) or called.name in self.assigned or node.dyn_args or node.dyn_kwargs:
            return node
        texts = [arg.value for arg in node.args if isinstance(arg, nodes.Const)]
        if len(texts) != len(node.args):
            return node
        values = {keyword.key: keyword.value for keyword in node.kwargs}
        constants = {key: value.value for key, value in values.items() if isinstance(value, nodes.Const)}
        if called.name in ("_", "gettext") and len(texts) == 1 and isinstance(texts[0], str):
            if len(constants) == len(values):
                return _markup(self.text.gettext(texts[0], **constants), node.lineno)
            translated = Markup(self.text.catalog.ugettext(texts[0]))
            line = node.lineno
            pairs = [nodes.Pair(nodes.Const(key), value, lineno=line) for key, value in values.items()]
            return nodes.Mod(_markup(translated, line), nodes.Dict(pairs, lineno=line), lineno=line)
        if called.name == "ngettext" and len(texts) == 3 and len(constants) == len(values):
            singular, plural, count = texts
            if isinstance(singular, str) and isinstance(plural, str) and isinstance(count, int):
                return _markup(self.text.ngettext(singular, plural, count, **constants), node.lineno)
        return node


def _markup(text: Markup, lineno: int) -> nodes.MarkSafe:
    """A translated text written into the template: markup, as the call it replaces returned."""
    return nodes.MarkSafe(nodes.Const(str(text), lineno=lineno), lineno=lineno)
