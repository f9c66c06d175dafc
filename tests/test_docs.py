"""The README and the pages under docs/ as a fresh clone has them: every relative link and image resolves."""

import ast
import re

import pytest

from support.portal import PROJECT_ROOT

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
# Markdown links and images, and HTML src/href attributes.
TARGETS = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|(?:src|href)=\"([^\"]+)\"")


def relative_targets(page):
    for match in TARGETS.finditer(page.read_text()):
        target = match.group(1) or match.group(2)
        if not re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # not http:, mailto:, or an anchor on the same page
            yield target.split("#", 1)[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_relative_link_and_image_exists(page):
    missing = [target for target in relative_targets(page) if not (page.parent / target).exists()]
    assert missing == [], f"{page.name} links to files a clone does not have"


def test_no_page_links_outside_the_repository():
    for page in PAGES:
        for target in relative_targets(page):
            assert (page.parent / target).resolve().is_relative_to(PROJECT_ROOT), (page.name, target)


# Paths a page names in the checkout; the wheel's own names for templates/ and static/ (pyproject.toml) are not in it.
NAMED_PATHS = re.compile(r"(?<![\w./-])(?:petportal|bench|tests)/[\w./-]*")
WHEEL_ONLY = {"petportal/templates", "petportal/static"}
# `module.name` in code spans: a module of petportal/ or bench/ by its dotted path or its own name (`logs.formatter`).
CODE_SPANS = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\(\))?(?![\w./-])")
FILE_ENDINGS = {"py", "md", "html", "css", "js", "mjs", "json", "csv", "mo", "po", "toml", "txt", "cfg", "ini", "png"}


def defined_names(module):
    """What a module defines at its top level: functions, classes, assigned and imported names."""
    names = set()
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            names.update(
                name.id for name in ast.walk(node) if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)
            )
    return names


def modules_by_name():
    """The modules of petportal/ and bench/ by their own names (a package by its folder's)."""
    found = {}
    for module in [*(PROJECT_ROOT / "petportal").rglob("*.py"), *(PROJECT_ROOT / "bench").glob("*.py")]:
        found.setdefault(module.parent.name if module.stem == "__init__" else module.stem, []).append(module)
    return found


def inner(module, parts):
    """The module that `parts` lead to from `module`, through its subpackages and modules, and the parts left."""
    while parts and module.stem == "__init__":
        folder = module.parent / parts[0]
        if folder.is_dir():
            module = folder / "__init__.py"
        elif folder.with_suffix(".py").is_file():
            module = folder.with_suffix(".py")
        else:
            break
        parts = parts[1:]
    return module, parts


def names_something_missing(dotted, modules):
    """Whether `dotted` starts with a module of the project and goes on to something it does not define."""
    first, *rest = dotted.split(".")
    if rest[-1] in FILE_ENDINGS:
        return False
    candidates = [PROJECT_ROOT / first / "__init__.py"] if first in ("petportal", "bench") else modules.get(first, [])
    found = [inner(module, rest) for module in candidates]
    return bool(found) and not any(not parts or parts[0] in defined_names(module) for module, parts in found)


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_named_path_and_function_exists(page):
    text = page.read_text()
    paths = {match.rstrip(".,") for match in NAMED_PATHS.findall(text)} - WHEEL_ONLY
    assert sorted(path for path in paths if not (PROJECT_ROOT / path).exists()) == [], f"{page.name} names these"
    modules = modules_by_name()
    names = {match for span in CODE_SPANS.findall(text) for match in DOTTED.findall(span)}
    assert sorted(name for name in names if names_something_missing(name, modules)) == [], f"{page.name} names these"


# A figure lives in its page; the code names the row: `# docs/performance.md, "template_text"`.
POINTERS = re.compile(r'docs/([\w-]+\.md),\s*(?:#\s*)?"([^"]+)"')
CODE = [
    *(PROJECT_ROOT / "petportal").rglob("*.py"),
    *(PROJECT_ROOT / "bench").glob("*.py"),
    PROJECT_ROOT / "gunicorn.conf.py",
]


def test_every_row_the_code_points_to_is_on_its_page():
    def words(text):
        return " ".join(text.split())

    pointers = {pointer for module in CODE for pointer in POINTERS.findall(module.read_text())}
    missing = [
        (page, row) for page, row in pointers if words(row) not in words((PROJECT_ROOT / "docs" / page).read_text())
    ]
    assert pointers and missing == []
