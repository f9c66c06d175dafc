"""The README and the pages under docs/ as a fresh clone has them: every relative link and image resolves."""

import ast
import contextlib
import os
import re
import signal
import subprocess
import uuid

import pytest
import sqlalchemy

from support.helpers import POSTGRES_URL
from support.portal import PROJECT_ROOT, portal_environment
from support.servers import free_port

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


# --- the commands an operator copies, run as written -------------------------------------------------------


def doc_block(page, marker):
    """The bash block that follows `<!-- marker -->` in docs/`page`."""
    text = (PROJECT_ROOT / "docs" / page).read_text()
    return re.search(rf"<!-- {marker} -->\s*```bash\n(.*?)```", text, re.DOTALL).group(1)


@pytest.mark.slow
def test_two_reference_stores_start_as_written_and_each_takes_only_its_own_key(tmp_path):
    """development.md's two stores on one machine (on free ports here): each answers listPets with its own key
    and refuses the other's, as the check block's numbers say."""
    production_port, staging_port = free_port(), free_port()
    check = doc_block("development.md", "two-stores-check")
    expected = re.findall(r"# ([0-9]{3})$", check, re.MULTILINE)
    script = "\n".join(
        [
            doc_block("development.md", "two-stores"),
            f"python -c 'from petportal.running.processes import wait_for_port as w; w({production_port}); "
            f"w({staging_port})'",
            check,
            "kill $(jobs -p)",
        ]
    )
    script = script.replace("8001", str(production_port)).replace("8002", str(staging_port))
    shell = subprocess.Popen(
        ["bash", "-euc", script],
        cwd=tmp_path,
        env=portal_environment(PATH=os.environ["PATH"]),
        start_new_session=True,  # the stores in the background and the shell: one process group, stopped together
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        output, errors = shell.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)
    assert expected == ["200", "401", "200", "401"]
    assert [line for line in output.splitlines() if re.fullmatch("[0-9]{3}", line)] == expected, output + errors
    assert (tmp_path / "instance" / "production-store.sqlite").exists()
    assert (tmp_path / "instance" / "staging-store.sqlite").exists()


@pytest.mark.slow
def test_the_postgresql_database_is_made_as_written_and_init_db_fills_it(tmp_path):
    """deploying.md's account and database, made by the superuser (here over TCP, not sudo), then init-db."""
    if not POSTGRES_URL:
        pytest.skip("PETPORTAL_TEST_DATABASE_URL is not set: no PostgreSQL to test against")
    server = sqlalchemy.engine.make_url(POSTGRES_URL)
    name = "docs_" + uuid.uuid4().hex[:10]
    script = doc_block("deploying.md", "postgresql-database").replace("sudo -u postgres ", "")
    script = re.sub(r"\bpetportal\b", name, script).replace("127.0.0.1:5432", f"{server.host}:{server.port or 5432}")
    env = portal_environment(
        PATH=os.environ["PATH"],
        PGHOST=server.host,
        PGPORT=str(server.port or 5432),
        PGUSER=server.username or "postgres",
        PETSTORE_PRODUCTION_URL="http://127.0.0.1:9/v1",
        PETSTORE_PRODUCTION_KEY="production-key-0123456789ab",
        PETPORTAL_SECRET_KEY="x" * 32,
    )
    try:
        result = subprocess.run(
            ["bash", "-euc", script],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "tables are ready" in result.stdout + result.stderr
        database = server.set(username=name, password="choose-a-long-password-0123", database=name)
        engine = sqlalchemy.create_engine(database)
        try:
            tables = set(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()
        assert {"users", "category_labels", "alembic_version"} <= tables
    finally:
        admin = sqlalchemy.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            connection.execute(sqlalchemy.text(f"DROP ROLE IF EXISTS {name}"))
        admin.dispose()
