"""The portal's own data: accounts and their second factors, logins and sessions, settings, the audit log,
submission tokens, category labels, each account's additions, and bulk imports with their rows."""

from datetime import UTC, datetime
from enum import StrEnum

from flask_login import UserMixin
from sqlalchemy import ForeignKey, Index, UniqueConstraint, literal, type_coerce
from sqlalchemy import false as sa_false
from sqlalchemy import true as sa_true
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.hybrid import hybrid_method
from sqlalchemy.orm import Mapped, mapped_column, relationship
from sqlalchemy.sql import ColumnElement
from sqlalchemy.types import JSON, BigInteger, Boolean, DateTime, Integer, LargeBinary, String, Text, TypeDecorator

from petportal.clock import now
from petportal.config import EVERY_ENVIRONMENT, Environment
from petportal.data import passwords
from petportal.extensions import Model


class Role(StrEnum):
    """What an account may do: staff add animals; admins may also do everything that runs the portal."""

    STAFF = "staff"
    ADMIN = "admin"


class SecondFactor(StrEnum):
    """How a login proved a second factor (`LoginSession.second_factor`): a code of the account's app (totp), one of
    its recovery codes, the identity provider (its `amr` named one), or a passkey, which signs in alone."""

    TOTP = "totp"
    RECOVERY = "recovery"
    PROVIDER = "provider"
    PASSKEY = "passkey"


class TicketState(StrEnum):
    """Where one animal to add stands: an add form's submission token, or one row of a bulk import.

    issued: not sent yet (or never reached the store: it may be sent); sending: one request or runner holds it
    and calls createPet; created: `pet_id` is the animal; refused: the store answered 400, nothing was added;
    unknown: the call may have reached the store, so it is never sent again. invalid: an import row the
    portal's own checks refused at preview, never sent. kept: an add form's token whose animal was kept, while the
    store was not answering, as a one-row import sent when it answers again (`BulkImport.kept`)."""

    ISSUED = "issued"
    SENDING = "sending"
    CREATED = "created"
    REFUSED = "refused"
    UNKNOWN = "unknown"
    INVALID = "invalid"
    KEPT = "kept"


class ImportState(StrEnum):
    """Where a bulk import stands (see `BulkImport`)."""

    PREVIEW = "preview"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    STOPPED = "stopped"
    DONE = "done"


class RowReason(StrEnum):
    """Why an import row stands where it does, kept as `ImportRow.reason` with its values (data/payloads.py) and
    put into words when shown (imports/reasons.py), in the visitor's language.

    invalid: the portal's checks refused it; refused: the store answered 400; no_answer: its call got no usable
    answer; portal_stopped: the portal stopped while it was being sent; promoted_before: a promotion's staging animal
    was promoted already; gone: the staging store no longer has it; duplicate: the target store already lists an
    animal with the same name, category and status, so the row is left out unless it is chosen at the start;
    recorded: words kept before reasons were codes."""

    INVALID = "invalid"
    REFUSED = "refused"
    NO_ANSWER = "no_answer"
    PORTAL_STOPPED = "portal_stopped"
    PROMOTED_BEFORE = "promoted_before"
    GONE = "gone"
    DUPLICATE = "duplicate"
    RECORDED = "recorded"


class StopReason(StrEnum):
    """Why an import stopped sending, kept as `BulkImport.reason` with its values (data/payloads.py).

    key_rejected, unavailable, row_unknown (a row got no usable answer): paused; switched: the active environment
    changed; limited: its owner no longer works on its environments; recorded: words kept before reasons were codes."""

    KEY_REJECTED = "key_rejected"
    UNAVAILABLE = "unavailable"
    ROW_UNKNOWN = "row_unknown"
    SWITCHED = "switched"
    LIMITED = "limited"
    RECORDED = "recorded"


# JSON as a column keeps it: a stored reason or detail is its code and the values its words need (data/payloads.py).
JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
Json = dict[str, JsonValue]


class AuditAction(StrEnum):
    """What an audit entry records (`AuditEntry.action`); audit.ACTIONS names each for people."""

    LOGIN = "login"
    LOGIN_FAILED = "login_failed"
    LOGIN_LIMITED = "login_limited"
    LOGIN_REFUSED = "login_refused"
    LOGOUT = "logout"
    MFA_SUCCEEDED = "mfa_succeeded"
    MFA_FAILED = "mfa_failed"
    MFA_LIMITED = "mfa_limited"
    MFA_ENROLLED = "mfa_enrolled"
    MFA_RESET = "mfa_reset"
    RECOVERY_CODE_USED = "recovery_code_used"
    PASSKEY_ADDED = "passkey_added"
    PASSKEY_USED = "passkey_used"
    PASSKEY_REFUSED = "passkey_refused"
    PASSKEY_REMOVED = "passkey_removed"
    PASSWORD_CHANGED = "password_changed"
    PASSWORD_CHANGE_FAILED = "password_change_failed"
    PASSWORD_RESET = "password_reset"
    OTHER_SESSIONS_ENDED = "other_sessions_ended"
    SESSIONS_ENDED = "sessions_ended"
    USER_CREATED = "user_created"
    USER_DISABLED = "user_disabled"
    USER_ENABLED = "user_enabled"
    ROLE_CHANGED = "role_changed"
    ENVIRONMENT_SWITCHED = "environment_switched"
    PREVIEW_CHANGED = "preview_changed"
    CATEGORY_LABELLED = "category_labelled"
    CATEGORY_UNLABELLED = "category_unlabelled"
    ANIMAL_ADDED = "animal_added"
    ANIMAL_OUTCOME_UNKNOWN = "animal_outcome_unknown"
    ANIMALS_IMPORTED = "animals_imported"
    IMPORT_STARTED = "import_started"
    IMPORT_DISCARDED = "import_discarded"
    ENVIRONMENTS_CHANGED = "environments_changed"
    ANIMALS_PROMOTED = "animals_promoted"


class AuditDetail(StrEnum):
    """What more an audit entry says beyond its columns, as `AuditEntry.details` with its values (data/payloads.py),
    worded by admin/audit_log.py in the reader's language. recorded: words kept before codes."""

    CATEGORY_LABELLED = "category_labelled"
    CATEGORY_RENAMED = "category_renamed"
    CATEGORY_UNLABELLED = "category_unlabelled"
    ANIMAL_ADDED = "animal_added"
    ANIMAL_ADDED_BY_IMPORT = "animal_added_by_import"
    OUTCOME_UNKNOWN = "outcome_unknown"
    OUTCOME_UNKNOWN_IN_IMPORT = "outcome_unknown_in_import"
    IMPORT_STARTED = "import_started"
    IMPORT_RETRIED = "import_retried"
    IMPORT_DISCARDED = "import_discarded"
    ANIMALS_IMPORTED = "animals_imported"
    CREATED_BY_ADMIN = "created_by_admin"
    CREATED_FROM_COMMAND_LINE = "created_from_command_line"
    CREATED_BY_SIGN_ON = "created_by_sign_on"
    ROLE_CHANGED = "role_changed"
    ROLE_CHANGED_BY_SIGN_ON = "role_changed_by_sign_on"
    SESSIONS_ENDED = "sessions_ended"
    SIGN_ON_LOGOUT = "sign_on_logout"
    EVERY_SESSION_ENDED = "every_session_ended"
    PASSWORD_RESET = "password_reset"
    WRONG_PASSWORD = "wrong_password"
    OTHER_SESSIONS_ENDED = "other_sessions_ended"
    NEW_DEVICE = "new_device"
    ACCOUNT_DISABLED = "account_disabled"
    NO_ROLE_CLAIM = "no_role_claim"
    FROM_COMMAND_LINE = "from_command_line"
    CODES_LEFT = "codes_left"
    PASSKEY = "passkey"
    SWITCHED_FROM = "switched_from"
    PREVIEW_CLEARED = "preview_cleared"
    ENVIRONMENTS = "environments"
    ENVIRONMENTS_BY_SIGN_ON = "environments_by_sign_on"
    NO_ENVIRONMENT_CLAIM = "no_environment_claim"
    ANIMAL_PROMOTED = "animal_promoted"
    OUTCOME_UNKNOWN_IN_PROMOTION = "outcome_unknown_in_promotion"
    ANIMALS_PROMOTED = "animals_promoted"
    RECORDED = "recorded"


class UTCDateTime(TypeDecorator[datetime]):
    """A UTC timestamp that reads back timezone-aware on every database (SQLite drops the zone)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.astimezone(UTC) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


class StateColumn(TypeDecorator[StrEnum]):
    """A state stored as its text (at most `length` characters), read back as its `StrEnum` member."""

    impl = String
    cache_ok = True

    def __init__(self, states: type[StrEnum], length: int = 16) -> None:
        super().__init__(length)
        self.states = states

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else str(self.states(value))

    def process_result_value(self, value: str | None, dialect: Dialect) -> StrEnum | None:
        return None if value is None else self.states(value)


class EnvironmentSet(TypeDecorator[frozenset[Environment]]):
    """Environments stored as their names, sorted and space-separated (`names`; so in the audit log too)."""

    impl = String(64)
    cache_ok = True

    @staticmethod
    def names(environments: frozenset[Environment]) -> str:
        return " ".join(sorted(environments))

    @staticmethod
    def read(names: str) -> frozenset[Environment]:
        return frozenset(map(Environment, names.split()))

    def process_bind_param(self, value: frozenset[Environment] | None, dialect: Dialect) -> str | None:
        return None if value is None else self.names(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> frozenset[Environment] | None:
        return None if value is None else self.read(value)


class User(UserMixin, Model):
    """A staff member or an admin (customers have no account). Disabled, never deleted: the rows that name it (logins,
    tokens, additions, imports, second factors) have foreign keys without ON DELETE, so a delete is refused."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(80), unique=True)
    # None for an account that signs in through the company's identity provider only (no password to check).
    password_hash: Mapped[str | None] = mapped_column(String(255))
    role: Mapped[Role] = mapped_column(StateColumn(Role))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now)
    last_login_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A disabled account cannot log in, and its open logins end on their next request.
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=sa_true())
    # Set by an admin's initial or reset password: the account reaches no page but the change until it is done.
    must_change_password: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    # The TOTP secret, encrypted (auth.mfa); None while the account has no second factor.
    mfa_secret: Mapped[str | None] = mapped_column(Text)
    mfa_enabled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The time step of the last accepted code, so no code is accepted twice.
    mfa_last_step: Mapped[int | None] = mapped_column(BigInteger)
    # When the account's logins were last all ended (password changed or reset, sessions ended): a login
    # begun before then and still waiting for its second factor can no longer finish.
    logins_ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Made by single sign-on: the provider's issuer and the person's `sub` there; found by these alone, never by name.
    sso_issuer: Mapped[str | None] = mapped_column(String(255))
    sso_subject: Mapped[str | None] = mapped_column(String(255))
    # The environments this account may work on (every one, for accounts made before 0012); read on every request.
    environments: Mapped[frozenset[Environment]] = mapped_column(
        EnvironmentSet, default=EVERY_ENVIRONMENT, server_default=EnvironmentSet.names(EVERY_ENVIRONMENT)
    )

    __table_args__ = (UniqueConstraint("sso_issuer", "sso_subject", name="uq_users_sso"),)

    def set_password(self, password: str) -> None:
        """Store a salted hash of `password` (data/passwords.py)."""
        self.password_hash = passwords.hashed(password)

    def check_password(self, password: str) -> bool:
        """Whether `password` is this user's password; as slow for an account without one (data/passwords.py)."""
        return passwords.matches(self.password_hash, password)

    def has_role(self, role: Role) -> bool:
        """Admins may do everything staff may do."""
        return self.role in (role, Role.ADMIN)

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def only_environment(self) -> Environment | None:
        """The one environment this account is limited to, or None when it may work on every one."""
        return next(iter(self.environments)) if len(self.environments) == 1 else None

    @hybrid_method
    def works_on(self, environment: str) -> bool:
        """Whether this account may see and change `environment` (the one rule pages, imports and additions ask)."""
        return environment in self.environments

    @works_on.expression
    @classmethod
    def _works_on_expression(cls, environment: str) -> ColumnElement[bool]:
        # The same rule in SQL, for a statement that decides it as it writes (an import's claim of a row): the
        # name as a whole word of the column's stored text, alike on SQLite and PostgreSQL.
        stored = literal(" ") + type_coerce(cls.environments, String) + " "
        return stored.contains(f" {environment} ", autoescape=True)

    @property
    def mfa_enabled(self) -> bool:
        return self.mfa_secret is not None

    @property
    def is_sso(self) -> bool:
        """Signs in through the company's identity provider, and has no password here."""
        return self.sso_subject is not None

    @property
    def is_active(self) -> bool:
        """Flask-Login's word for an account that may log in."""
        return self.enabled


class RecoveryCode(Model):
    """A single-use recovery code for a lost second factor: random (50 bits), so its SHA-256 is kept, no slow hash."""

    __tablename__ = "recovery_codes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    code_hash: Mapped[str] = mapped_column(String(64))
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Passkey(Model):
    """An account's passkey (a WebAuthn credential): it signs in alone, and is an admin's second factor. `sign_count`
    and the backup flags are as last seen; a use whose non-zero count does not move on is refused (a clone)."""

    __tablename__ = "passkeys"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    # The credential's id, base64url as the browser sends it; unique across every account.
    credential_id: Mapped[str] = mapped_column(String(1400), unique=True)
    public_key: Mapped[bytes] = mapped_column(LargeBinary)
    sign_count: Mapped[int] = mapped_column(BigInteger, default=0)
    name: Mapped[str] = mapped_column(String(80))
    backup_eligible: Mapped[bool] = mapped_column(Boolean, default=False)
    backed_up: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Setting(Model):
    """A portal-wide setting shared by every process, such as the active environment."""

    __tablename__ = "settings"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(255))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now, onupdate=now)


class AuditEntry(Model):
    """Who did what, when: never a password or a key."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=now, index=True)
    # Accounts by their user names, not foreign keys, on purpose: the log is history and outlives what it names.
    actor: Mapped[str] = mapped_column(String(80))
    action: Mapped[AuditAction] = mapped_column(StateColumn(AuditAction, 32))
    # The account an admin's change was made to, when it was made to one.
    target: Mapped[str | None] = mapped_column(String(80))
    environment: Mapped[str | None] = mapped_column(String(32))
    # What more it says: a code and its values (`AuditDetail`), put into words when shown; None when nothing more.
    details: Mapped[Json | None] = mapped_column(JSON)
    remote_addr: Mapped[str | None] = mapped_column(String(64))
    # How many attempts this entry stands for: failed and refused logins are counted on one entry per account,
    # address and window (audit.COUNTED), not written an entry each.
    count: Mapped[int] = mapped_column(Integer, default=1, server_default="1")


class LoginCounter(Model):
    """One login (or code) counter of one window, kept in the portal's database when there is no Redis, so every worker
    and instance counts on the same rows (auth/throttle.py). `key` names the counter, its limit and whom it counts
    ("login_limit_per_address/20/1/minute/192.0.2.7"); `hits` are the attempts counted in the window that ends at
    `expires_at`. An expired row starts again at its next attempt, and is deleted when no attempt comes."""

    __tablename__ = "login_counters"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    hits: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class UsedLogoutToken(Model):
    """The `jti` of a back-channel logout token the portal has taken (auth/sso.py), kept until the token is too old to
    be taken anyway, so a replay to any worker or instance is refused. Expired rows are deleted as new ones come."""

    __tablename__ = "used_logout_tokens"

    jti: Mapped[str] = mapped_column(String(255), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class SubmissionToken(Model):
    """A one-time token carried by one rendered add form, so that form creates at most one animal; its `state` is a
    `TicketState`, and a refused one's form may be corrected and sent again."""

    __tablename__ = "submission_tokens"

    token: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", name="submission_tokens_user_id_fkey"), index=True)
    environment: Mapped[str] = mapped_column(String(32))
    state: Mapped[TicketState] = mapped_column(StateColumn(TicketState), default=TicketState.ISSUED)
    pet_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now, index=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now, onupdate=now)


class CategoryLabel(Model):
    """A name people read for a category id ("Dogs" for 1), per environment: staging's ids need not be production's."""

    __tablename__ = "category_labels"

    environment: Mapped[str] = mapped_column(String(32), primary_key=True)
    category_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    label: Mapped[str] = mapped_column(String(60))
    # The label in German and in Spanish, when it reads otherwise there; None: `label` is shown in that language
    # too (catalog.categories.in_language). One column per language the portal speaks besides English.
    label_de: Mapped[str | None] = mapped_column(String(60))
    label_es: Mapped[str | None] = mapped_column(String(60))
    # The label as people compare labels (catalog.browse.folded), unique per environment: two categories never
    # read the same, not even when two admins name them at the same moment.
    label_key: Mapped[str] = mapped_column(String(240))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now, onupdate=now)

    __table_args__ = (UniqueConstraint("environment", "label_key", name="uq_category_labels_environment_label_key"),)


class Addition(Model):
    """One animal an account added through the portal, for its "Your additions" page."""

    __tablename__ = "additions"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", name="additions_user_id_fkey"))
    environment: Mapped[str] = mapped_column(String(32))
    pet_id: Mapped[int] = mapped_column(BigInteger)
    name: Mapped[str] = mapped_column(Text)
    added_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now)

    __table_args__ = (Index("ix_additions_user_environment_added", "user_id", "environment", "added_at"),)


class BulkImport(Model):
    """One CSV file of animals a staff member uploaded, bound to the environment it was previewed for. States: preview
    (nothing sent; may be discarded), queued (waiting for a runner), running, paused (the store was unavailable or
    refused the key: `reason`), stopped (the active environment changed), done. A runner holds it while `lease_until` is
    in the future, renewing as it goes; another may take it over once the lease has run out."""

    __tablename__ = "imports"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", name="imports_user_id_fkey"), index=True)
    # The owner's name when it was uploaded, as the audit log keeps names.
    username: Mapped[str] = mapped_column(String(80))
    environment: Mapped[str] = mapped_column(String(32))
    filename: Mapped[str] = mapped_column(String(255))
    # SHA-256 of the file, so the preview can warn about a file already imported.
    digest: Mapped[str] = mapped_column(String(64))
    total: Mapped[int] = mapped_column(Integer)
    state: Mapped[ImportState] = mapped_column(StateColumn(ImportState), default=ImportState.PREVIEW)
    # Why it paused or stopped (`StopReason`), while it is paused or stopped.
    reason: Mapped[Json | None] = mapped_column(JSON(none_as_null=True))
    # The active environment when the import was (re)started: a switch away from it stops the import.
    active_at_start: Mapped[str | None] = mapped_column(String(32))
    runner: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A promotion: the environment its animals are copied from (staging); None for a CSV file's import.
    source: Mapped[str | None] = mapped_column(String(32))
    # An animal of the add form kept while the store was not answering (`when_back=1`): a one-row import that waits,
    # queued, and is sent once the store answers again; shown in Your additions, not among the imports.
    kept: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    # Every row in file order, read only: rows are claimed and settled by conditional UPDATEs (catalog/adding.py).
    rows: Mapped[list["ImportRow"]] = relationship(order_by="ImportRow.position", viewonly=True)


class LastGoodAnswer(Model):
    """The store's last good answer to one read (listPets or getPet with its values) in one environment, as its records:
    it stands in while the store is not answering (serving/stand_in.py); shared here, or in Redis if any."""

    __tablename__ = "last_good_answers"

    # The environment, its store's address, the operation and its values (stand_in.answer_key).
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    environment: Mapped[str] = mapped_column(String(32))
    answered_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    records: Mapped[Json | list[JsonValue]] = mapped_column(JSON)


class ImportRow(Model):
    """One animal of a bulk import, claimed as an add form's token is; its `state` is a `TicketState`."""

    __tablename__ = "import_rows"

    import_id: Mapped[str] = mapped_column(ForeignKey("imports.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    # The file's line the row ended on, as people count them (the header is line 1).
    line: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    # What the file said, as text: shown in the preview even when it is not a valid id.
    category: Mapped[str] = mapped_column(Text)
    category_id: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[str | None] = mapped_column(Text)
    state: Mapped[TicketState] = mapped_column(StateColumn(TicketState))
    # Why it was refused, or why its outcome is unknown (`RowReason`).
    reason: Mapped[Json | None] = mapped_column(JSON(none_as_null=True))
    pet_id: Mapped[int | None] = mapped_column(BigInteger)
    # A promotion's row: the animal's id in the environment it is promoted from.
    source_id: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now, onupdate=now)

    __table_args__ = (Index("ix_import_rows_import_state", "import_id", "state"),)


class Promotion(Model):
    """The ledger of promotions: one staging animal, promoted to production at most once, ever. A promotion's row claims
    its staging id here in the commit that claims the row for sending, so no other promotion, session or instance sends
    it again. States (`TicketState`): sending, created (`production_id` is the animal), unknown (the call may have
    reached production: never resent). A row the store refused or never got gives its claim back (entry deleted)."""

    __tablename__ = "promotions"

    staging_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    # No foreign key, on purpose: the ledger is history that outlives its import. An entry is what keeps its animal
    # from being promoted twice, so nothing that removes an import (or its row) may take the entry with it, and no
    # missing import may make a migration drop it; `import_id` only narrows a claim to the import that holds it.
    import_id: Mapped[str] = mapped_column(String(32))
    position: Mapped[int] = mapped_column(Integer)
    state: Mapped[TicketState] = mapped_column(StateColumn(TicketState))
    production_id: Mapped[int | None] = mapped_column(BigInteger)
    username: Mapped[str] = mapped_column(String(80))
    promoted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=now)


class LoginSession(Model):
    """One login of an account in one browser, from the password to logout or a limit. Every request checks its row, so
    ending it (logout, or an admin ending the account's sessions) takes effect on the next request, in every process.
    `remember_hash`: the SHA-256 of the "keep me logged in" token, new at every use."""

    __tablename__ = "login_sessions"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", name="login_sessions_user_id_fkey"), index=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    remember_hash: Mapped[str | None] = mapped_column(String(64))
    address: Mapped[str | None] = mapped_column(String(64))
    user_agent: Mapped[str | None] = mapped_column(String(255))
    # How this login proved a second factor, or None: admin pages ask for one where PETPORTAL_REQUIRE_ADMIN_MFA says.
    second_factor: Mapped[SecondFactor | None] = mapped_column(StateColumn(SecondFactor))


class ServerSession(Model):
    """One browser's session data, kept on the server when no Redis is configured (the cookie holds only its id)."""

    __tablename__ = "server_sessions"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
