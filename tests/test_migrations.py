"""The schema over time: init-db creates or upgrades, a 0.1.0 database keeps its accounts and audit log."""

import subprocess

import flask_migrate
import sqlalchemy
from werkzeug.security import generate_password_hash

from petportal import create_app
from petportal.admin import audit_log
from petportal.data.models import AuditEntry, BulkImport, ImportRow
from petportal.extensions import db

from support.helpers import PASSWORDS, AuthActions, portal_config
from support.portal import FLASK_PORTAL, PROJECT_ROOT, portal_environment, prepare_portal
from support.servers import run_init_db


def make_0_1_0_database(app):
    """What 0.1.0's init-db made (its tables, no migration record), with two accounts and audit rows."""
    with app.app_context():
        flask_migrate.upgrade(revision="0001")
        with db.engine.begin() as connection:
            connection.execute(sqlalchemy.text("DROP TABLE alembic_version"))
            for role, password in PASSWORDS.items():
                connection.execute(
                    sqlalchemy.text(
                        "INSERT INTO users (username, password_hash, role, created_at) "
                        "VALUES (:name, :hash, :role, CURRENT_TIMESTAMP)"
                    ),
                    {"name": role, "hash": generate_password_hash(password), "role": role},
                )
            for number in range(3):
                connection.execute(
                    sqlalchemy.text(
                        "INSERT INTO audit_log (at, actor, action, detail) "
                        "VALUES (CURRENT_TIMESTAMP, 'staff', 'login_failed', :detail)"
                    ),
                    {"detail": f"old row {number}"},
                )
        db.engine.dispose()


OWNER = (
    "INSERT INTO users (id, username, password_hash, role, created_at) "
    "VALUES (1, 'staff', 'not a hash', 'staff', CURRENT_TIMESTAMP)"
)


def init_db(app):
    result = app.test_cli_runner().invoke(args=["init-db"])
    assert result.exit_code == 0, result.output
    assert "tables are ready" in result.output


def test_init_db_creates_a_new_database_and_is_idempotent(tmp_path, database_url, production_store, staging_store):
    app = create_app(
        portal_config(tmp_path, production_store.url, staging_store.url, SQLALCHEMY_DATABASE_URI=database_url)
    )
    init_db(app)
    init_db(app)
    with app.app_context():
        tables = set(sqlalchemy.inspect(db.engine).get_table_names())
        db.engine.dispose()
    made = {"users", "audit_log", "login_sessions", "server_sessions", "used_logout_tokens", "alembic_version"}
    assert made <= tables
    app.extensions["petportal.petstore.environments"].close()


def test_a_0_1_0_database_is_upgraded_and_its_accounts_log_in(tmp_path, database_url, production_store, staging_store):
    app = create_app(
        portal_config(tmp_path, production_store.url, staging_store.url, SQLALCHEMY_DATABASE_URI=database_url)
    )
    make_0_1_0_database(app)
    init_db(app)
    init_db(app)
    client = app.test_client()
    assert AuthActions(client).login("admin").status_code == 303
    audit = client.get("/admin/audit")
    assert audit.text.count("old row") == 3
    staff = app.test_client()
    assert AuthActions(staff).login("staff").status_code == 303
    assert staff.get("/animals/new").status_code == 200
    with app.app_context():
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()


def test_the_models_and_the_migrations_agree(tmp_path):
    """`flask db check`, as CI runs it: after upgrading, autogenerate finds nothing to add."""
    env = portal_environment(
        PETSTORE_PRODUCTION_URL="http://127.0.0.1:9/v1",
        PETSTORE_PRODUCTION_KEY="production-key-0123456789ab",
        PETPORTAL_SECRET_KEY="x" * 32,
        PETPORTAL_DATABASE_URL=f"sqlite:///{tmp_path / 'check.sqlite'}",
    )
    prepare_portal(env)
    check = subprocess.run(
        [*FLASK_PORTAL, "db", "check"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert "No new upgrade operations detected" in check.stdout + check.stderr


def test_an_unreachable_database_is_named_with_its_password_hidden(tmp_path):
    env = portal_environment(
        PETSTORE_PRODUCTION_URL="http://127.0.0.1:9/v1",
        PETSTORE_PRODUCTION_KEY="production-key-0123456789ab",
        PETPORTAL_SECRET_KEY="x" * 32,
        PETPORTAL_DATABASE_URL="postgresql+psycopg://portal:s3cret-pw@127.0.0.1:1/portal",
    )
    result = run_init_db(env)
    assert result.returncode != 0
    assert "Cannot reach the portal's database at postgresql+psycopg://portal:***@127.0.0.1:1/portal" in result.stderr
    assert "s3cret-pw" not in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_labels_that_already_read_the_same_are_kept_and_the_later_renamed(tmp_path, database_url):
    """A database of 0005 where a race left two categories of one environment reading alike ("Dogs", "dogs")."""
    app = create_app(
        portal_config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", SQLALCHEMY_DATABASE_URI=database_url)
    )
    with app.app_context():
        flask_migrate.upgrade(revision="0005")
        with db.engine.begin() as connection:
            for environment, category_id, label in (
                ("production", 1, "Dogs"),
                ("production", 2, "dogs"),
                ("staging", 1, "Dogs"),
            ):
                connection.execute(
                    sqlalchemy.text(
                        "INSERT INTO category_labels (environment, category_id, label, updated_at) "
                        "VALUES (:environment, :category_id, :label, CURRENT_TIMESTAMP)"
                    ),
                    {"environment": environment, "category_id": category_id, "label": label},
                )
        flask_migrate.upgrade()
        with db.engine.connect() as connection:
            rows = connection.execute(
                sqlalchemy.text("SELECT environment, category_id, label FROM category_labels ORDER BY 1, 2")
            ).all()
        db.engine.dispose()
    assert [tuple(row) for row in rows] == [
        ("production", 1, "Dogs"),
        ("production", 2, "dogs (2)"),
        ("staging", 1, "Dogs"),
    ]
    app.extensions["petportal.petstore.environments"].close()


def test_the_import_messages_of_0006_become_reason_codes_and_come_back_on_downgrade(tmp_path, database_url):
    """A database of 0006 whose imports kept English sentences: the portal's own are read back into codes,
    anything else is kept as it was recorded."""
    app = create_app(
        portal_config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", SQLALCHEMY_DATABASE_URI=database_url)
    )
    switched = (
        "The portal switched from production to staging while this import ran. Nothing more was sent to production."
    )
    rows = [
        ("invalid", "This line has 4 values; each animal needs 3: name, categoryId, status."),
        ("invalid", "Enter the animal's name."),
        ("refused", "The pet store refused it: Category 1 is closed"),
        ("unknown", "The pet store gave no usable answer: it may or may not have added this animal."),
        ("unknown", "The portal stopped while this animal was being sent: the pet store may or may not have added it."),
        ("unknown", "Something an operator wrote by hand"),
        ("created", None),
    ]
    with app.app_context():
        flask_migrate.upgrade(revision="0006")
        with db.engine.begin() as connection:
            connection.execute(sqlalchemy.text(OWNER))
            connection.execute(
                sqlalchemy.text(
                    "INSERT INTO imports (id, user_id, username, environment, filename, digest, total, state, message, "
                    "created_at) VALUES ('i1', 1, 'staff', 'production', 'a.csv', 'd', 7, 'stopped', :message, "
                    "CURRENT_TIMESTAMP)"
                ),
                {"message": switched},
            )
            for position, (state, message) in enumerate(rows, start=1):
                connection.execute(
                    sqlalchemy.text(
                        "INSERT INTO import_rows (import_id, position, line, name, category, state, message, "
                        "updated_at) VALUES ('i1', :position, :position, 'Rex', '1', :state, :message, "
                        "CURRENT_TIMESTAMP)"
                    ),
                    {"position": position, "state": state, "message": message},
                )
        flask_migrate.upgrade()
        with db.engine.connect() as connection:
            stop = connection.execute(sqlalchemy.select(BulkImport.reason)).scalar_one()
            reasons = connection.execute(sqlalchemy.select(ImportRow.reason).order_by(ImportRow.position)).scalars()
            reasons = list(reasons)
        flask_migrate.downgrade(revision="0006")
        with db.engine.connect() as connection:
            kept = connection.execute(sqlalchemy.text("SELECT message FROM import_rows ORDER BY position")).scalars()
            kept = list(kept)
            stopped = connection.execute(sqlalchemy.text("SELECT message FROM imports")).scalar_one()
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()
    assert stop == {"code": "switched", "previous": "production", "active": "staging"}
    assert reasons == [
        {"code": "invalid", "values": 4},
        {"code": "invalid", "values": 3},
        {"code": "refused", "message": "Category 1 is closed"},
        {"code": "no_answer"},
        {"code": "portal_stopped"},
        {"code": "recorded", "text": "Something an operator wrote by hand"},
        None,
    ]
    # Back at 0006: the same English, but for a refused row's checks, which only the newer portal works out.
    assert stopped == switched
    assert kept == [rows[0][1], "Refused by the portal's checks.", *[message for _, message in rows[2:]]]
    app.extensions["petportal.petstore.environments"].close()


def test_the_audit_sentences_of_0010_become_detail_codes_and_come_back_on_downgrade(tmp_path, database_url):
    """A database of 0010 whose audit entries kept English sentences: the portal's own are read back into codes
    and values (so a German admin reads them in German), anything else is kept as it was recorded."""
    app = create_app(
        portal_config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", SQLALCHEMY_DATABASE_URI=database_url)
    )
    written = [
        ("environment_switched", "staging", "from production to staging"),
        ("category_labelled", "production", "category 3 renamed from 'Fish' to \"Fish 'n' chips\""),
        ("animal_added", "production", "id 12: Rex (bulk import Ab-_9, line 4)"),
        ("role_changed", None, "single sign-on: staff to admin"),
        ("preview_changed", "staging", "staging"),
        ("login", None, ""),
        ("login_refused", None, "Something an operator wrote by hand"),
    ]
    with app.app_context():
        flask_migrate.upgrade(revision="0010")
        with db.engine.begin() as connection:
            for action, environment, detail in written:
                connection.execute(
                    sqlalchemy.text(
                        "INSERT INTO audit_log (at, actor, action, environment, detail, count) "
                        "VALUES (CURRENT_TIMESTAMP, 'admin', :action, :environment, :detail, 1)"
                    ),
                    {"action": action, "environment": environment, "detail": detail},
                )
        flask_migrate.upgrade()
        with db.engine.connect() as connection:
            details = connection.execute(sqlalchemy.select(AuditEntry.details).order_by(AuditEntry.id)).scalars()
            details = list(details)
        flask_migrate.downgrade(revision="0010")
        with db.engine.connect() as connection:
            kept = connection.execute(sqlalchemy.text("SELECT detail FROM audit_log ORDER BY id")).scalars()
            kept = list(kept)
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()
    assert details == [
        {"code": "switched_from", "previous": "production"},
        {"code": "category_renamed", "category": 3, "previous": "Fish", "label": "Fish 'n' chips"},
        {"code": "animal_added_by_import", "pet_id": 12, "name": "Rex", "import_id": "Ab-_9", "line": 4},
        {"code": "role_changed_by_sign_on", "previous": "staff", "role": "admin"},
        None,
        None,
        {"code": "recorded", "text": "Something an operator wrote by hand"},
    ]
    assert kept == [detail for _, _, detail in written]
    with app.test_request_context(headers={"Accept-Language": "de"}):
        entry = AuditEntry(environment="staging", details=details[0], count=1)
        assert audit_log.details(entry) == "von Produktion zu Staging"


ACCOUNT_ROWS = [
    "INSERT INTO login_sessions (id, user_id, started_at, last_seen_at) "
    "VALUES ('login-{user}', {user}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
    "INSERT INTO submission_tokens (token, user_id, environment, state, created_at, updated_at) "
    "VALUES ('token-{user}', {user}, 'production', 'issued', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
    "INSERT INTO additions (user_id, environment, pet_id, name, added_at) "
    "VALUES ({user}, 'production', {user}, 'Rex', CURRENT_TIMESTAMP)",
    "INSERT INTO imports (id, user_id, username, environment, filename, digest, total, state, created_at, source) "
    "VALUES ('import-{user}', {user}, 'someone', 'production', 'a.csv', 'd', 1, 'done', CURRENT_TIMESTAMP, 'staging')",
    "INSERT INTO import_rows (import_id, position, line, name, category, state, updated_at, source_id) "
    "VALUES ('import-{user}', 1, 2, 'Rex', '1', 'created', CURRENT_TIMESTAMP, {user})",
    "INSERT INTO promotions (staging_id, import_id, position, state, production_id, username, promoted_at) "
    "VALUES ({user}, 'import-{user}', 1, 'created', {user}, 'someone', CURRENT_TIMESTAMP)",
]
NAMING_AN_ACCOUNT = ("login_sessions", "submission_tokens", "additions", "imports")


def test_rows_of_a_gone_account_are_deleted_and_the_foreign_keys_added(tmp_path, database_url):
    """A database of 0013 holding rows of an account that is gone (as the downgrade of 0008 leaves an account of
    single sign-on's): the upgrade deletes them, keeps the promotions ledger whole, and every row that names an
    account then has its foreign key; the downgrade takes the keys away again."""
    app = create_app(
        portal_config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", SQLALCHEMY_DATABASE_URI=database_url)
    )
    with app.app_context():
        flask_migrate.upgrade(revision="0013")
        with db.engine.begin() as connection:
            connection.execute(sqlalchemy.text(OWNER))
            for user in (1, 2):  # account 2 is gone
                for statement in ACCOUNT_ROWS:
                    connection.execute(sqlalchemy.text(statement.format(user=user)))
        flask_migrate.upgrade()
        inspector = sqlalchemy.inspect(db.engine)
        keys = {table: inspector.get_foreign_keys(table) for table in NAMING_AN_ACCOUNT}
        with db.engine.connect() as connection:
            owners = {
                table: connection.execute(sqlalchemy.text(f"SELECT user_id FROM {table}")).scalars().all()
                for table in NAMING_AN_ACCOUNT
            }
            rows = connection.execute(sqlalchemy.text("SELECT import_id FROM import_rows")).scalars().all()
            ledger = connection.execute(sqlalchemy.text("SELECT staging_id FROM promotions ORDER BY 1")).scalars().all()
        flask_migrate.downgrade(revision="0013")
        left = {table: sqlalchemy.inspect(db.engine).get_foreign_keys(table) for table in NAMING_AN_ACCOUNT}
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()
    for table in NAMING_AN_ACCOUNT:
        assert [
            (key["name"], key["constrained_columns"], key["referred_table"], key["referred_columns"])
            for key in keys[table]
        ] == [(f"{table}_user_id_fkey", ["user_id"], "users", ["id"])]
        assert owners[table] == [1]
        assert left[table] == []
    assert rows == ["import-1"]
    # The ledger is history: its entry still keeps the gone account's animal from being promoted again.
    assert ledger == [1, 2]


def test_labels_gain_a_label_per_language_and_keep_their_default_on_downgrade(tmp_path, database_url):
    """A database of 0014 with a label: 0015 keeps it, with no German or Spanish label of its own (the default is
    shown there); the downgrade drops the per-language labels and keeps the default one."""
    app = create_app(
        portal_config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", SQLALCHEMY_DATABASE_URI=database_url)
    )
    with app.app_context():
        flask_migrate.upgrade(revision="0014")
        with db.engine.begin() as connection:
            connection.execute(
                sqlalchemy.text(
                    "INSERT INTO category_labels (environment, category_id, label, label_key, updated_at) "
                    "VALUES ('production', 1, 'Dogs', 'dogs', CURRENT_TIMESTAMP)"
                )
            )
        flask_migrate.upgrade()
        with db.engine.begin() as connection:
            upgraded = connection.execute(
                sqlalchemy.text("SELECT label, label_de, label_es FROM category_labels")
            ).all()
            connection.execute(sqlalchemy.text("UPDATE category_labels SET label_de = 'Hunde'"))
        flask_migrate.downgrade(revision="0014")
        columns = {column["name"] for column in sqlalchemy.inspect(db.engine).get_columns("category_labels")}
        with db.engine.connect() as connection:
            kept = connection.execute(sqlalchemy.text("SELECT label FROM category_labels")).scalars().all()
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()
    assert [tuple(row) for row in upgraded] == [("Dogs", None, None)]
    assert "label_de" not in columns and "label_es" not in columns
    assert kept == ["Dogs"]


def test_0016_keeps_every_import_unkept_adds_the_last_good_answers_and_goes_back(tmp_path, database_url):
    """A database of 0014 with an import: after 0016 the import is a file's import (not an animal kept for the
    store's return) and the store's last good answers have their table; the downgrade takes both away again."""
    app = create_app(
        portal_config(tmp_path, "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", SQLALCHEMY_DATABASE_URI=database_url)
    )
    with app.app_context():
        flask_migrate.upgrade(revision="0014")
        with db.engine.begin() as connection:
            connection.execute(sqlalchemy.text(OWNER))
            connection.execute(sqlalchemy.text(ACCOUNT_ROWS[3].format(user=1)))
        flask_migrate.upgrade(revision="0016")
        with db.engine.connect() as connection:
            kept = connection.execute(sqlalchemy.text("SELECT kept FROM imports")).scalars().all()
        tables = set(sqlalchemy.inspect(db.engine).get_table_names())
        flask_migrate.downgrade(revision="0014")
        inspector = sqlalchemy.inspect(db.engine)
        left = set(inspector.get_table_names()), {column["name"] for column in inspector.get_columns("imports")}
        db.engine.dispose()
    app.extensions["petportal.petstore.environments"].close()
    assert kept == [False]
    assert "last_good_answers" in tables
    assert "last_good_answers" not in left[0] and "kept" not in left[1]
