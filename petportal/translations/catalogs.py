"""The portal's translation catalogs: one `<code>/LC_MESSAGES/messages.po` per language beside this file.

    python petportal/translations/catalogs.py update    # extract the messages, merge them into each catalog
    python petportal/translations/catalogs.py check     # fail on a message missing, untranslated or fuzzy
    python petportal/translations/catalogs.py compile   # write each catalog's messages.mo

The `.mo` files are never committed: this module is also the build backend (pyproject.toml `backend-path`),
setuptools' own with the catalogs compiled first. It imports only Babel, never the portal.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Where the messages are, and how each kind of file is read.
SOURCES = (
    (ROOT / "petportal", [("**/reference_store/**.py", "ignore"), ("**.py", "python")]),
    (ROOT / "templates", [("**.html", "jinja2")]),
)
KEYWORDS = {**DEFAULT_KEYWORDS, "_l": None}  # Babel's own, and the portal's lazy_gettext
JINJA_OPTIONS = {"extensions": "jinja2.ext.do", "trimmed": "true"}


def catalogs(folder: Path = HERE) -> dict[str, Path]:
    """Each language's catalog file, by language code."""
    return {path.parent.parent.name: path for path in sorted(folder.glob("*/LC_MESSAGES/messages.po"))}


def extracted() -> Catalog:
    """Every message the code and the templates ask to translate."""
    template = Catalog(project="petportal", charset="utf-8")
    for folder, method_map in SOURCES:
        options = {pattern: JINJA_OPTIONS for pattern, method in method_map if method == "jinja2"}
        for filename, lineno, message, comments, context in extract_from_dir(
            str(folder), method_map, options, keywords=KEYWORDS, strip_comment_tags=True
        ):
            template.add(
                message, None, [(f"{folder.name}/{filename}", lineno)], auto_comments=comments, context=context
            )
    return template


def _read(path: Path, language: str) -> Catalog:
    with path.open("rb") as file:
        return read_po(file, locale=language)


def update(folder: Path = HERE) -> None:
    """Merge the extracted messages into every catalog (new ones untranslated, stale ones dropped)."""
    template = extracted()
    for language, path in catalogs(folder).items():
        catalog = _read(path, language)
        catalog.update(template, no_fuzzy_matching=True)
        catalog.obsolete.clear()
        catalog.fuzzy = False  # the header: its plural forms are the language's own
        with path.open("wb") as file:
            write_po(file, catalog, width=100, omit_header=False)


def problems(folder: Path = HERE) -> list[str]:
    """Every message of the code that some catalog lacks, leaves untranslated or marks fuzzy."""
    template = extracted()
    found = []
    for language, path in catalogs(folder).items():
        catalog = _read(path, language)
        for message in template:
            if not message.id:
                continue
            translated = catalog.get(message.id, context=message.context)
            text = message.id if isinstance(message.id, str) else message.id[0]
            if translated is None:
                found.append(f"{language}: missing: {text!r}")
            elif translated.fuzzy:
                found.append(f"{language}: fuzzy: {text!r}")
            elif not all(translated.string) if isinstance(translated.string, tuple) else not translated.string:
                found.append(f"{language}: untranslated: {text!r}")
    return found


def compile_all(folder: Path = HERE) -> None:
    """Write each catalog's `messages.mo` beside it."""
    for language, path in catalogs(folder).items():
        with path.with_suffix(".mo").open("wb") as file:
            write_mo(file, _read(path, language))


def __getattr__(name: str) -> Any:
    """The build backend's hooks: setuptools' own, with the catalogs compiled before a wheel or editable install."""
    from setuptools import build_meta  # type: ignore[import-untyped]  # no stubs; only the build runs this

    hook = getattr(build_meta, name)
    if name not in ("build_wheel", "build_editable"):
        return hook

    def compiled_first(*args: Any, **kwargs: Any) -> Any:
        compile_all()
        return hook(*args, **kwargs)

    return compiled_first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("update", "check", "compile"))
    parser.add_argument("--catalogs", type=Path, default=HERE, help="the folder of the catalogs (tests use a copy)")
    args = parser.parse_args()
    if args.action == "update":
        update(args.catalogs)
    elif args.action == "compile":
        compile_all(args.catalogs)
    else:
        found = problems(args.catalogs)
        for problem in found:
            print(problem, file=sys.stderr)
        if found:
            sys.exit(f"{len(found)} messages are not translated; run `update`, translate, and check again")
        print(f"every message is translated in {', '.join(catalogs(args.catalogs))}")


if __name__ == "__main__":
    main()
