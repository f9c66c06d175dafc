"""The one egress guard for what leaves the process beside its pages: every log line and every span.

Pages, CSV and errors shown to people pass the pet store client's guard (`petstore.errors`). What the portal's
libraries write is not theirs to clean: urllib3 logs a store's header line that it could not parse, whole;
OpenTelemetry records an exception's chained traceback on a span. So every log record, of every logger (the
portal's, urllib3, Werkzeug, the server's, Authlib, SQLAlchemy, RQ...), is checked with its exception text and
stack as it is made (`logs` installs `guard_record` as part of the log-record factory, and as a filter on the
portal's handlers for records made some other way), and every span before it is exported (`tracing`'s
`GuardedExporter`). The check is the client's own (`SecretGuard`, with this process's secrets:
`config.secret_values`). A line or an attribute that quotes a secret is replaced whole by a marker; it is never
partly redacted.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from .petstore.errors import SecretGuard

# What a log line says instead of one that quoted a secret: its logger, level and time stay.
WITHHELD_LINE = "[log line withheld: it quoted a secret]"
# What a span attribute (or a span's name, status or event) says instead.
WITHHELD_VALUE = "[withheld: quoted a secret]"
# The attributes every LogRecord has: what a record carries beside them ("extra", a context filter's) is checked.
_RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
# A record's attribute saying it needs no check: its maker (`logs.AccessLines`) checked all it can say.
CHECKED = "egress_checked"
# Values that cannot hold text.
_PLAIN = (int, float, bool, type(None))


class _Guard:
    """This process's secrets and their guard, replaced together."""

    secrets: tuple[str, ...] = ()
    check = SecretGuard(())


def protect(secrets: Iterable[str]) -> None:
    """Guard every log line and span of this process against `secrets`: those of the app built last (a server, a
    worker or a command builds one; a test process builds many, one after the other, each with its own keys)."""
    kept = tuple(dict.fromkeys(secret for secret in secrets if secret))
    if kept != _Guard.secrets:
        _Guard.check, _Guard.secrets = SecretGuard(kept), kept


def quotes_secret(text: str) -> bool:
    """Whether `text` quotes one of this process's secrets (in any form the client's guard reads back)."""
    return _Guard.check(text)


def withheld(value: Any) -> Any:
    """A span attribute's `value`, or WITHHELD_VALUE when it (or any text in it) quotes a secret."""
    if isinstance(value, str):
        return WITHHELD_VALUE if _Guard.check(value) else value
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, bytes | bytearray):
        return WITHHELD_VALUE if _Guard.check(bytes(value).decode("latin-1")) else value
    if isinstance(value, list | tuple) and all(isinstance(item, _PLAIN) for item in value):
        return value
    return WITHHELD_VALUE if _Guard.check(str(value)) else value


def guard_record(record: logging.LogRecord) -> logging.LogRecord:
    """`record`, withheld when anything it can write quotes a secret: its message by WITHHELD_LINE, its exception
    and stack dropped, and each of its extra fields that quotes one by WITHHELD_VALUE. Nothing is copied: every
    handler the record then reaches writes the marker."""
    if not _Guard.secrets or getattr(record, CHECKED, False):
        return record
    if _record_quotes_secret(record):
        record.msg, record.args = WITHHELD_LINE, ()
        record.exc_info = record.exc_text = record.stack_info = None
        for name, value in list(record.__dict__.items()):
            if name not in _RECORD_ATTRIBUTES and not isinstance(value, _PLAIN) and _Guard.check(str(value)):
                record.__dict__[name] = WITHHELD_VALUE
    return record


def _record_quotes_secret(record: logging.LogRecord) -> bool:
    """Whether anything `record` can write quotes a secret: all of it checked as one text, in one pass."""
    try:
        texts = [record.getMessage()]
    except Exception:  # noqa: BLE001 - a message that cannot be made: logging reports it; its parts are checked
        texts = [str(record.msg), str(record.args)]
    if record.exc_info and record.exc_info[1] is not None:
        # The traceback with its chained causes, as a formatter writes it (the exceptions' own texts included).
        texts.append(_FORMATTER.formatException(record.exc_info))
    texts += [text for text in (record.exc_text, record.stack_info) if text]
    for name, value in record.__dict__.items():
        if name not in _RECORD_ATTRIBUTES and not isinstance(value, _PLAIN):
            text = str(value)
            if text not in texts[0]:  # a field the message already shows is not checked twice
                texts.append(text)
    return _Guard.check("\n".join(texts))


_FORMATTER = logging.Formatter()


class EgressFilter(logging.Filter):
    """A handler's filter: the record passes, withheld whole when it quotes a secret (`guard_record`). For the
    records the log-record factory did not make, and for the fields a context filter adds after it."""

    def filter(self, record: logging.LogRecord) -> bool:
        guard_record(record)
        return True


def guard_every_record() -> None:
    """Make every log record of this process, of any logger, pass `guard_record` as it is made: the log-record
    factory sits in front of every handler there is or will be (a server's, RQ's, a library's own). Once per
    process; a factory set before is kept, inside."""
    make = logging.getLogRecordFactory()
    if getattr(make, "egress_guarded", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return guard_record(make(*args, **kwargs))

    guarded.egress_guarded = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(guarded)
