"""The README and the pages under docs/ as a fresh clone has them: every relative link and image resolves."""

import ast
import itertools
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


# The import graph against the map: docs/architecture.md's table of layers, top to bottom, and docs/layout.md's
# table of every file.
PACKAGE = PROJECT_ROOT / "petportal"
APART = {"migrations", "translations", "reference_store"}  # not rooms: the schema, the catalogs, the other app


def table(page, heading):
    """The first cells and the rows of the table under `heading` in docs/`page`."""
    lines = (PROJECT_ROOT / "docs" / page).read_text().split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(number for number, line in enumerate(lines) if line.startswith("| "))
    rows = itertools.takewhile(lambda line: line.startswith("| "), lines[start + 2 :])
    return [row.split(" | ") for row in rows]


def layers():
    """Each room of petportal (a folder, or a module at its top) with its layer's place in the table, top first."""
    found = {"petportal": 0}
    for place, (_layer, where, *_) in enumerate(table("architecture.md", "## The layers")):
        for name in re.findall(r"`([\w.]+)/?`", where.split(":")[0] if "`:" in where else where):
            room = name.removesuffix(".py")
            if (PACKAGE / room).is_dir() or (PACKAGE / f"{room}.py").is_file():
                found[room] = place
    return found


def room_of(module):
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    return "petportal" if parts == ("__init__",) else parts[0]


def imported_rooms(module):
    """The rooms of petportal that `module` imports, wherever the import stands (at the top or in a function)."""
    for node in ast.walk(ast.parse(module.read_text())):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module + "." + alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "petportal" and len(parts) > 1:
                yield parts[1]


def import_graph():
    """Which rooms each room imports, its own left out."""
    graph = {}
    for module in PACKAGE.rglob("*.py"):
        room = room_of(module)
        if room not in APART:
            imported = set(imported_rooms(module)) - {room}
            graph.setdefault(room, set()).update(imported)
    return graph


def test_every_room_has_its_layer_and_imports_run_down():
    graph, place = import_graph(), layers()
    assert len(place) > 10 and sorted(set(graph) - set(place)) == [], "rooms docs/architecture.md's layers do not name"
    upward = sorted(
        (room, other) for room, imported in graph.items() for other in imported if place[other] < place[room]
    )
    assert upward == [], "imports running back up a layer"


def test_no_import_circles_between_rooms():
    graph = import_graph()

    def reaches(start, goal, seen):
        return any(
            nxt == goal or (nxt not in seen and reaches(nxt, goal, seen | {nxt})) for nxt in graph.get(start, ())
        )

    circles = sorted(room for room in graph if reaches(room, room, {room}))
    assert circles == [], "rooms that import themselves through others"


def test_every_file_the_layout_names_exists_and_every_room_is_named():
    named = {
        path.rstrip("/")
        for first, *_ in table("layout.md", "## Every file")
        for path in re.findall(r"`([^`]+)`", first)
    }
    assert sorted(path for path in named if not (PROJECT_ROOT / path).exists()) == []
    rooms = {room for room in import_graph() if room != "petportal"}
    mentioned = {path.split("/")[1].removesuffix(".py") for path in named if path.startswith("petportal/")}
    assert sorted(rooms - mentioned) == [], "rooms docs/layout.md does not name"
