"""The key guard: whether a text quotes a secret, read as a person reads it (docs/security.md,
"The API key stays on the server").

Every text a pet store sends passes it before a page, a file or an error shows it (with that store's key alone), and
every log line and span before it leaves the process (`egress`, with every secret). A text and the secrets are read
alike: escapes decoded, what shows as nothing dropped, compatibility forms decomposed, look-alike letters read as
their Latin letter, separators dropped. A text quotes a secret when it holds a run of the secret long enough to be
worth guessing at: `run` characters, at least SECRET_RUN, so that what a guard withholds, which anyone who can write
a name can see, tells nothing about fewer characters of a key than that (about 2^72 guesses for a key's run).

Reading costs time linear in a text's length, with a small constant whatever its characters: one `str.translate`
through a table made once a process, where no character becomes more than a few."""

import base64
import functools
import html
import math
import re
import string
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Protocol, cast
from urllib.parse import unquote

import ahocorasick
from confusable_homoglyphs.utils import load as load_confusables

# A character that reads as more than one letter or digit reads as itself: nobody writes a key in ligatures ("㎯" is
# "rads2", "⅒" is "110"), and so no text reads longer than it is (bench/guard.py).
_LONGEST_READING = 1
# The fewest consecutive characters of a secret a match carries (letters and digits, as the guard reads them).
SECRET_RUN = 12
# A run is made longer where a secret's characters come from a smaller alphabet (hex, digits), until guessing one
# takes about this many bits: 12 characters of a key drawn from 64 (token_urlsafe) are 72.
GUESSING_BITS = 72
# A JSON escape: \uXXXX, or one of the one-letter escapes (\n, \t, \", ...).
_JSON_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|([nrtbf"/\\]))')
_JSON_LETTERS = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "/": "/", "\\": "\\"}
# Escapes of one byte or code point as Python's repr writes them (\x80, \U0001f600) and C's octal (\200).
_BYTE_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|U([0-9a-fA-F]{8})|([0-3][0-7]{2}))")
# Escapes inside escapes (a percent sign written as &#37;, say) are undone this many times over, at most.
_DECODING_ROUNDS = 3
# Unicode's tag characters spell ASCII invisibly: U+E0020..U+E007E are the printable ASCII characters plus this.
_TAG_OFFSET = 0xE0000
_TAGGED = re.compile("[\U000e0020-\U000e007e]+")
# Format and control characters and combining marks: what nobody reads.
_UNREAD = ("Cf", "Cc", "Mn", "Me")
# Letters and symbols that show as nothing, though Unicode files them as letters (the Hangul fillers) or symbols
# (the blank Braille pattern): Unicode's Default_Ignorable_Code_Point outside the categories above, and U+2800.
_BLANK = frozenset("\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
# A letter whatever its dress: "LATIN LETTER SMALL CAPITAL P", "NEGATIVE SQUARED LATIN CAPITAL LETTER P", "REGIONAL
# INDICATOR SYMBOL LETTER P" all read as "P" (where Unicode gives no decomposition to follow).
_DRESSED_LETTER = re.compile(
    "(?:LATIN LETTER SMALL CAPITAL|(?:[A-Z -]+ )?(?:LATIN (?:CAPITAL |SMALL )?|SYMBOL )LETTER) ([A-Z])"
)
# The characters the table covers: the BMP and the Supplementary Multilingual Plane. Beyond them, the tags and the
# variation selectors supplement show as nothing; any other character is read as U+FFFD, which no secret holds.
_TABLE_SIZE = 0x20000
_UNREAD_BEYOND = re.compile("[\U000e0000-\U000e0fff]")
_BEYOND = re.compile("[\U00020000-\U0010ffff]")
_TAG_LETTERS = {_TAG_OFFSET + code: chr(code) for code in range(0x80)}
# How confusables.json keeps right-to-left glyphs: between left-to-right marks, which are no part of them.
_DIRECTION_MARKS = str.maketrans("", "", "\u200e\u200f")
# The alphabets a secret's letters and digits may come from, to size its run: digits, and the letters of each case,
# all 26 unless the secret uses only hex's (a-f), 64 for any other script.
_ALPHABETS = ((string.digits, string.digits), (string.ascii_lowercase, "abcdef"), (string.ascii_uppercase, "ABCDEF"))
_OTHER_ALPHABET = 64
# A key's label, public by its nature: one or two short words of letters, each followed by "_" or "-", at its start
# ("sk_live_", "petstore_live_", "PROD-"). A run that held part of one would be a run of fewer unknown characters: an
# attacker who knows the label could learn the key a character at a time from what is withheld. So the runs are taken
# from what follows it. (Short words: a random key that starts with letters and a "-" loses no more than them.)
_LABEL = re.compile(r"(?:[A-Za-z]{1,8}[_-]){1,2}")


def unread(char: str) -> bool:
    """Whether a person reading a text sees nothing of `char` (a format or control character, a combining mark, a
    filler that shows as blank): the key guard drops it, and a download looks past it for a formula's start."""
    return char in _BLANK or unicodedata.category(char) in _UNREAD


class SecretGuard:
    """`guard(text)`: whether `text` quotes one of the secrets. Each is looked for as runs of `run(secret)` of its
    characters, as is, reversed, in hex (either case) and in base64 (any alignment, so after "Bearer "); all of a secret
    shorter than its run. Case counts: folding it would cost each letter of a key a bit of what a run takes to guess."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._pieces = _automaton(tuple(secret for secret in secrets if secret))

    def __call__(self, text: str) -> bool:
        if self._pieces is None or not text:
            return False
        # Every piece looked for at once (Aho-Corasick): linear in the text, whatever its characters and however many
        # pieces there are (docs/performance.md, "the key guard's one search").
        return any(next(self._pieces.iter(reading), None) is not None for reading in _readings(text))


def quotes_secret(text: str, secrets: Iterable[str]) -> bool:
    """Whether `text` quotes one of `secrets` (see `SecretGuard`; a guard kept for many texts is cheaper)."""
    return SecretGuard(tuple(secrets))(text)


def after_label(secret: str) -> str:
    """What follows `secret`'s label ("sk_live_", `_LABEL`): all of it where it has none."""
    label = _LABEL.match(secret)
    return secret[label.end() :] if label else secret


def unlabelled(secret: str) -> str:
    """`secret` without its label, where enough follows it to hold a run; else all of it (a short secret of a log)."""
    rest = after_label(secret)
    return rest if sum(map(str.isalnum, rest)) >= SECRET_RUN else secret


def run(secret: str) -> int:
    """How many letters and digits of `secret` in a row (after its label) a match must carry (the guard reads past the
    rest): SECRET_RUN, more where they come from a smaller alphabet (a hex key's runs are 18, a UUID's too), so that a
    run takes about GUESSING_BITS to guess; all of a shorter secret."""
    read = reading(unlabelled(secret))
    alphabet = _OTHER_ALPHABET if not read.isascii() else 0
    for letters, fewest in _ALPHABETS:
        used = {char for char in read if char in letters}
        alphabet += 0 if not used else len(fewest) if used <= set(fewest) else len(letters)
    return min(len(read), max(SECRET_RUN, round(GUESSING_BITS / math.log2(max(alphabet, 2)))))


def reading(text: str) -> str:
    """`text` as the guard reads it, tag characters unread (see `_table`)."""
    return _readings(text)[0]


def _readings(text: str) -> tuple[str, ...]:
    """What `text` says, escapes decoded: as it shows and, where it has tag characters, with them spelling ASCII."""
    text = _unescaped(text)
    if not _TAGGED.search(text):
        return (_shown(text),)
    # Each run of tags translated on its own: a dict that misses raises, for each character it does not hold.
    return (_shown(text), _shown(_TAGGED.sub(lambda tags: tags[0].translate(_TAG_LETTERS), text)))


def _shown(text: str) -> str:
    return _BEYOND.sub("\ufffd", _UNREAD_BEYOND.sub("", text)).translate(_table())


def _unescaped(text: str) -> str:
    # Each step only where it can change something; each round only makes the text shorter.
    for _ in range(_DECODING_ROUNDS):
        before = text
        if "\\" in text:
            text = _BYTE_ESCAPE.sub(_byte_unescaped, _JSON_ESCAPE.sub(_json_unescaped, text))
            # A character outside the BMP is escaped as two halves (\ud83d\ude00): join them as JSON does.
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        if "%" in text:
            text = unquote(text)
        if "&" in text:
            text = html.unescape(text)
        if text == before:
            break
    return text


def _json_unescaped(escape: re.Match[str]) -> str:
    return chr(int(escape[1], 16)) if escape[1] else _JSON_LETTERS[escape[2]]


def _byte_unescaped(escape: re.Match[str]) -> str:
    code = int(escape[1] or escape[2], 16) if escape[1] or escape[2] else int(escape[3], 8)
    return chr(code) if code <= 0x10FFFF else escape[0]


@functools.cache
def _table() -> tuple[str | int, ...]:
    """How each character below _TABLE_SIZE reads, for `str.translate` (indexed by code point: a tuple translates
    faster than a dict): an ASCII letter or digit as itself, ASCII punctuation and what shows as nothing as nothing,
    any other character as the ASCII letters and digits a person reads in it (compatibility forms decomposed,
    look-alikes as their Latin letter, Unicode TR39), or as itself where it reads as none, kept as its code point (an
    int, not a string of its own: docs/performance.md, "Tables made once"). Made from Unicode's data and
    confusable-homoglyphs' copy of confusables.txt once a process, when the first text is read."""
    lookalikes = _lookalikes()
    characters: list[str | int] = [chr(code) if chr(code).isalnum() else "" for code in range(128)]
    for code in range(128, _TABLE_SIZE):
        char = chr(code)
        read = "" if unread(char) else _read(unicodedata.normalize("NFKD", char), lookalikes)
        characters.append(code if read is None or len(read) > _LONGEST_READING or read == char else read)
    return tuple(characters)


def _read(decomposed: str, lookalikes: dict[str, str]) -> str | None:
    """The ASCII letters and digits a person reads in `decomposed` (a character's NFKD); None: another script's."""
    read = []
    for char in decomposed:
        if char.isascii() or unread(char):
            read.append(char if char.isalnum() else "")
        elif (found := lookalikes.get(char)) is not None:
            read.append(found)
        elif char.isalnum():
            return None
    return "".join(read)


def _lookalikes() -> dict[str, str]:
    """Non-ASCII characters read as ASCII letters or digits, to them: a Latin look-alike, dressed letter or digit."""
    linked: dict[str, set[str]] = {}
    for glyph, confusables in load_confusables("confusables.json").items():
        partners = linked.setdefault(glyph.translate(_DIRECTION_MARKS), set())
        partners.update(confusable["c"].translate(_DIRECTION_MARKS) for confusable in confusables)
    # The library keeps each line of confusables.txt (a character and its prototype) in both directions. A
    # character with several partners is a prototype; one with one partner maps to it, unless that partner has
    # no other: then either may be the prototype, and the pair reads as the ASCII one or the lower code point.
    prototypes: dict[str, str] = {}
    for glyph, partners in linked.items():
        if len(glyph) != 1 or glyph.isascii() or len(partners) != 1:
            continue
        (partner,) = partners
        if len(partner) == 1 and linked.get(partner) == {glyph}:
            partner = min(glyph, partner, key=lambda char: (not char.isascii(), char))
        prototypes[glyph] = partner
    found: dict[str, str] = {}
    for code in range(0x80, _TABLE_SIZE):
        char = chr(code)
        prototype = prototypes.get(char, "")
        # A prototype's own characters read as theirs ("ǉ" is "lj"); an ASCII one reads as itself.
        prototype = "".join(part if part.isascii() else prototypes.get(part, part) for part in prototype)
        if prototype and prototype.isascii():
            found[char] = "".join(filter(str.isalnum, prototype))
        elif (name := unicodedata.name(char, ""))[-2:-1] == " " and (dressed := _DRESSED_LETTER.fullmatch(name)):
            # (only a name that ends in a lone letter is matched: docs/performance.md, "Tables made once")
            found[char] = dressed[1].lower() if "SMALL LETTER" in name else dressed[1]
        elif (digit := unicodedata.digit(char, None)) is not None:
            found[char] = str(digit)  # a digit of any script or dress ("❶") reads as its value
    return found


class _Automaton(Protocol):
    def iter(self, text: str) -> Iterator[tuple[int, str]]: ...


@functools.lru_cache(maxsize=32)
def _automaton(secrets: tuple[str, ...]) -> _Automaton | None:
    """An automaton finding any of `secrets`' pieces in a text, or None when there are none."""
    pieces = _pieces(secrets)
    if not pieces:
        return None
    automaton = ahocorasick.Automaton()
    for piece in pieces:
        automaton.add_word(piece, piece)
    automaton.make_automaton()
    return cast(_Automaton, automaton)


def _pieces(secrets: tuple[str, ...]) -> frozenset[str]:
    """The readings to look for: each secret's runs of `run(secret)` letters and digits, as they are and reversed,
    and the stretches of the secret that hold them written in hex of either case and in base64."""
    pieces: set[str] = set()
    for secret in map(unlabelled, secrets):
        length = run(secret)
        runs = _runs(reading(secret), length)
        pieces.update(runs, (piece[::-1] for piece in runs))
        kept = [index for index, char in enumerate(secret) if reading(char)] or [0]
        for first, last in zip(kept, kept[length - 1 :] or [len(secret) - 1], strict=False):
            stretch = secret[first : last + 1].encode()
            pieces.update((stretch.hex(), stretch.hex().upper()))
            # Base64 writes whole groups of three bytes, which may hold bytes from either side of the stretch: so
            # the stretch with two bytes either side, from each of the three alignments, where its groups hold a run.
            wider = secret[max(first - 2, 0) : last + 3].encode()
            for start in range(3):
                grouped = wider[start : start + (len(wider) - start) // 3 * 3]
                if len(reading(grouped.decode(errors="ignore"))) >= length:
                    pieces.add(reading(base64.b64encode(grouped).decode()))
    pieces.discard("")
    return frozenset(pieces)


def _runs(text: str, length: int) -> list[str]:
    """Every run of `length` in `text`, or `text` itself where it is shorter."""
    return [text[i : i + length] for i in range(len(text) - length + 1)] or [text]
