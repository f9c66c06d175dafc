"""The one egress guard for what leaves the process beside its pages: every log line and every span.

Libraries write secrets too (urllib3 logs an unparsable header line whole; spans record chained tracebacks), so every
log record is checked as it is made and every span before export, with a `SecretGuard` of every secret the settings
hold (handed over by `pipeline.build`). What quotes a secret is replaced whole, never partly redacted."""

import logging
from collections.abc import Callable
from typing import Any

WITHHELD_LINE = "[log line withheld: it quoted a secret]"
WITHHELD_VALUE = "[withheld: quoted a secret]"
# The attributes every LogRecord has: the others ("extra", a context filter's) are checked.
_RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
# A record's attribute saying it needs no check: its maker (`logs.AccessLines`) checked all it can say.
CHECKED = "egress_checked"
# Values that cannot hold text.
_PLAIN = (int, float, bool, type(None))
_FORMATTER = logging.Formatter()


class _Guard:
    """This process's guard: the check of the app built last (a test process builds many); None, no secrets."""

    check: Callable[[str], bool] | None = None


def protect(check: Callable[[str], bool] | None) -> None:
    """Guard every log line and span of this process with `check` (None: the app has no secrets)."""
    _Guard.check = check


def quotes_secret(text: str) -> bool:
    return (check := _Guard.check) is not None and check(text)  # read once: a test's next app may replace it


def withheld(value: Any) -> Any:
    """A span attribute's `value`, or WITHHELD_VALUE when it (or any text in it) quotes a secret."""
    if isinstance(value, _PLAIN) or (isinstance(value, list | tuple) and all(isinstance(i, _PLAIN) for i in value)):
        return value
    text = bytes(value).decode("latin-1") if isinstance(value, bytes | bytearray) else str(value)
    return WITHHELD_VALUE if quotes_secret(text) else value


def guard_record(record: logging.LogRecord) -> logging.LogRecord:
    """`record`, changed in place if it quotes a secret: message and quoting fields withheld, exception, stack gone."""
    if _Guard.check is None or getattr(record, CHECKED, False):
        return record
    if _record_quotes_secret(record):
        record.msg, record.args = WITHHELD_LINE, ()
        record.exc_info = record.exc_text = record.stack_info = None
        for name, value in list(record.__dict__.items()):
            if name not in _RECORD_ATTRIBUTES and not isinstance(value, _PLAIN) and quotes_secret(str(value)):
                record.__dict__[name] = WITHHELD_VALUE
    return record


def _record_quotes_secret(record: logging.LogRecord) -> bool:
    try:
        texts = [record.getMessage()]
    except Exception:  # noqa: BLE001 - a message that cannot be made: logging reports it; its parts are checked
        texts = [str(record.msg), str(record.args)]
    if record.exc_info and record.exc_info[1] is not None:
        texts.append(_FORMATTER.formatException(record.exc_info))
    texts += [text for text in (record.exc_text, record.stack_info) if text]
    for name, value in record.__dict__.items():
        if name not in _RECORD_ATTRIBUTES and not isinstance(value, _PLAIN):
            text = str(value)
            if text not in texts[0]:  # a field the message already shows is not checked twice
                texts.append(text)
    return quotes_secret("\n".join(texts))


class EgressFilter(logging.Filter):
    """A handler's `guard_record`, for records the factory did not make and fields a context filter adds later."""

    def filter(self, record: logging.LogRecord) -> bool:
        guard_record(record)
        return True


def guard_every_record() -> None:
    """Pass every log record through `guard_record` as it is made (a log-record factory wrapping any before)."""
    make = logging.getLogRecordFactory()
    if getattr(make, "egress_guarded", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return guard_record(make(*args, **kwargs))

    guarded.egress_guarded = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(guarded)
