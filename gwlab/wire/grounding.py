"""Source grounding: where in a text an extracted value is written, if anywhere. Pure (no pandas, no I/O).

A value is *exact* when the text states it: the same tokens once case, accents-as-written, whitespace,
punctuation and id separators are ignored ("BRW 10421" / "brw-10421" / "BRW10421"), the same number in
any usual writing ("$29.90", "29,90 €", "1,234.5"; never digits glued to an id's letters, "BW10421") or the
same date ("15 Jan 2026", "15/01/2026",
"January 15th, 2026", "2026年1月15日"). It is *fuzzy* when it is close but not the same: tokens matching
with accents folded or a small spelling difference, at least `FUZZY_THRESHOLD` of the value's tokens
matched in order within a short window, a number written as a word, a date whose year the text leaves
out. Otherwise it is *not_found*. A value of a kind that is not quoted (a yes/no, a category, a list, an
object, or a field whose schema says `"x-grounding": false`) is *exempt*.

Written is not enough: the span must be able to be the field's kind (`kind_of`: an identifier, a person's
name, an amount, a date, ...). A value whose every alignment is a span of another kind is *misplaced*
(ungrounded, like *not_found*): an order id "18" whose only "18" is in "18 euros", an id "1" that is the
word "one", a name "blue" that is a lowercase word of the message. The kind comes from the schema in one
rule (`kind_of`), and `"x-grounding": "<kind>"` on a property overrides it.

Every span is a (start, end) pair of offsets into the original text: `text[start:end]` is what matched.
*not_found* does not prove a value wrong (a right value may be paraphrased: "money back" for "refund"),
*misplaced* does not either (a customer may write her name in lower case), and *exact* does not prove it
right (a number may be written in the text for another reason).
"""

from __future__ import annotations

import datetime as dt
import difflib
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gwlab.errors import InvalidRequest

__all__ = ["EXACT", "EXEMPT", "FLAG", "FUZZY", "FUZZY_THRESHOLD", "KINDS", "MISPLACED", "NOT_FOUND", "STATUSES",
           "TOKEN_SIMILARITY", "UNGROUNDED", "Grounding", "Kind", "ground", "ground_fields", "kind_of"]

EXACT, FUZZY, NOT_FOUND, MISPLACED, EXEMPT = "exact", "fuzzy", "not_found", "misplaced", "exempt"
STATUSES = (EXACT, FUZZY, NOT_FOUND, MISPLACED, EXEMPT)
UNGROUNDED = (NOT_FOUND, MISPLACED)  # what "flag" flags and "drop" drops
# a schema property's `"x-grounding"`: false (exempt: a field the text never quotes) or one of KINDS
FLAG = "x-grounding"
# a fuzzy match needs this share of the value's tokens, matched in order: with 1-3 tokens, all of them
FUZZY_THRESHOLD = 0.75
# two tokens (accents folded, 4+ letters, no digit) match fuzzily from this difflib ratio: one typo in six
TOKEN_SIMILARITY = 0.8
Kind = Literal["string", "number", "amount", "date", "identifier", "person_name", "exempt"]
KINDS: tuple[Kind, ...] = ("string", "number", "amount", "date", "identifier", "person_name", "exempt")


@dataclass(frozen=True, slots=True)
class Grounding:
    """Where a value is written in its text: its status and the span `text[start:end]` (None if not found)."""

    status: str
    span: tuple[int, int] | None = None

    @property
    def grounded(self) -> bool:
        return self.status in (EXACT, FUZZY)


_NOT_FOUND = Grounding(NOT_FOUND)

# the words of a field's name that say its kind (the name split at "_", "-", spaces and camelCase)
_ID_WORDS = frozenset({"id", "ids", "no", "nr", "num", "number", "code", "ref", "reference", "sku", "uuid", "iban"})
_AMOUNT_WORDS = frozenset({"amount", "price", "total", "cost", "fee", "paid", "refund", "charge", "charged",
                           "balance", "sum", "payment", "subtotal", "deposit", "fare"})
_DATE_WORDS = frozenset({"date", "dob", "birthday", "birthdate"})
_NAME_WORDS = frozenset({"name", "fullname", "firstname", "lastname", "surname", "forename"})
_PERSONS = frozenset({"customer", "client", "patient", "guest", "sender", "contact", "person", "full", "first",
                      "last", "given", "family", "middle", "user", "author", "owner", "buyer", "recipient",
                      "caller", "applicant", "passenger", "traveler", "traveller", "employee", "member"})


def kind_of(prop: Mapping[str, Any], field: str = "") -> Kind:
    """How a JSON Schema property's values are aligned and which spans can be them: `"x-grounding"` when it
    names a kind (false: exempt); else from its type, format, pattern and the field's name (`_named`)."""
    subs = [prop, *prop.get("anyOf", []), *prop.get("oneOf", [])]
    flags = [s[FLAG] for s in subs if FLAG in s]
    if False in flags or any("enum" in s or "const" in s for s in subs):
        return "exempt"
    named = [f for f in flags if f is not True]
    if named:
        if not isinstance(named[0], str) or named[0] not in KINDS:
            raise InvalidRequest(f"schema.{field or 'property'}.{FLAG}",
                                 f"false or one of {', '.join(KINDS)}; got {named[0]!r}")
        return named[0]
    kinds = set()
    for sub in subs:
        kind = sub.get("type")
        kinds |= set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    kinds.discard("null")
    words = _name_words(field)
    if kinds <= {"integer", "number"} and kinds:
        return "identifier" if kinds == {"integer"} and _is_id(words) else \
            "amount" if words & _AMOUNT_WORDS else "number"
    if kinds == {"string"}:
        if {s.get("format") for s in subs} & {"date", "date-time"} or words & _DATE_WORDS:
            return "date"
        return "identifier" if any("pattern" in s for s in subs) or _is_id(words) else _named(words)
    return "exempt"  # booleans, arrays, objects, mixed types


def _name_words(field: str) -> set[str]:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", field)
    return {w for w in re.split(r"[\W_]+", snake.casefold()) if w}


def _is_id(words: set[str]) -> bool:
    return bool(words & _ID_WORDS) and not words & {"of", "count"}  # "number_of_items" counts


def _named(words: set[str]) -> Kind:
    """A person's name: "name", "full_name", "customer_name", "surname" (not "product_name")."""
    if words & (_NAME_WORDS - {"name"}) or (words & _NAME_WORDS and words - {"name"} <= _PERSONS):
        return "person_name"
    return "string"


def ground_fields(values: Mapping[str, Any], text: str | None, properties: Mapping[str, Mapping[str, Any]]
                  ) -> dict[str, Grounding | None]:
    """Per field of an answer that the text may quote (not exempt), its grounding (None: no value)."""
    kinds = {field: kind_of(prop, field) for field, prop in properties.items()}
    return {field: ground(values.get(field), text, kind) for field, kind in kinds.items() if kind != "exempt"}


def ground(value: Any, text: str | None, kind: Kind = "string") -> Grounding | None:
    """Align `value` with `text`; None for a missing value (nothing to ground). The first alignment whose
    span can be of the field's `kind` wins; when every one is of another kind, the value is misplaced (its
    span: the first of them)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if kind == "exempt" or isinstance(value, bool):
        return Grounding(EXEMPT)
    if not text:
        return _NOT_FOUND
    first = None
    for found in _alignments(value, text, kind):
        if found.span is not None and fits(kind, text, *found.span):
            return found
        first = first or found
    return Grounding(MISPLACED, first.span) if first else _NOT_FOUND


def _alignments(value: Any, text: str, kind: Kind) -> Iterator[Grounding]:
    """Every place the text writes `value`, best first: as the field's kind reads it (a number, a date), or
    a string's tokens, then its reading as a date or an amount."""
    if kind in ("number", "amount") or isinstance(value, int | float):
        yield from _ground_number(float(value), text)
        return
    if isinstance(value, dt.date):
        yield from _ground_date(value, text)
        return
    value = str(value)
    day = _iso_date(value)
    if kind == "date" and day is not None:
        yield from _ground_date(day, text)
        return
    yield from _ground_string(value, text)
    number = _amount(value)
    if day is not None:
        yield from _ground_date(day, text)
    elif number is not None:
        yield from _ground_number(number, text)


# --- tokens --------------------------------------------------------------------------------------------

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|(?:(?![{_CJK}])[^\W_])+")  # a CJK character alone, else a run of letters/digits


@dataclass(frozen=True, slots=True)
class _Token:
    norm: str  # NFKC, casefolded: what an exact match compares
    fold: str  # norm without accents: what a fuzzy match compares
    start: int
    end: int


def _tokens(text: str) -> list[_Token]:
    out = []
    for match in _TOKEN.finditer(text):
        norm = unicodedata.normalize("NFKC", match.group()).casefold()
        out.append(_Token(norm, _fold(norm), match.start(), match.end()))
    return out


def _fold(word: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))


def _ground_string(value: str, text: str) -> Iterator[Grounding]:
    words, where = _tokens(value), _tokens(text)
    if not words:
        return
    for span in _exact(words, where, text):
        yield Grounding(EXACT, span)
    for span in _fuzzy(words, where, text):
        yield Grounding(FUZZY, span)


def _exact(words: list[_Token], where: list[_Token], text: str) -> Iterator[tuple[int, int]]:
    """Each run of text tokens whose concatenation is the value's: separators and spaces ignored, tokens
    kept whole (so "BRW-10421", "BRW 10421" and "BRW10421" are one id, "10421" inside "110421" is not),
    and never a part of a number ("1" is not written in "$1,150.00", nor "02" in "12.02.2026")."""
    compact = "".join(w.norm for w in words)
    for i, first in enumerate(where):
        if not compact.startswith(first.norm):
            continue
        joined = ""
        for j in range(i, len(where)):
            joined += where[j].norm
            if joined == compact and not _part_of_a_number(text, first.start, where[j].end):
                yield first.start, where[j].end
            if not compact.startswith(joined):
                break


def _part_of_a_number(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` is glued to more digits by a number's separator (".", ",", "'")."""
    return bool(re.search(r"\d[.,']$", text[max(0, start - 2):start]) and text[start].isdigit()) or bool(
        re.match(r"[.,']\d", text[end:end + 2]) and text[end - 1].isdigit())


def _fuzzy(words: list[_Token], where: list[_Token], text: str) -> Iterator[tuple[int, int]]:
    """The windows of text tokens holding at least FUZZY_THRESHOLD of the value's tokens in order, never
    a part of a number: the most tokens matched first, then the earliest."""
    n = len(words)
    need = math.ceil(FUZZY_THRESHOLD * n - 1e-9)  # 1, 2, 3 of 1-3 tokens; 3 of 4; 4 of 5
    width = n + max(1, n // 2)
    found: list[tuple[int, int, tuple[int, int]]] = []
    for i in range(len(where)):
        if not any(_similar(w, where[i]) for w in words):
            continue  # a window starts on a matched token
        matched, last = _in_order(words, where[i:i + width])
        span = (where[i].start, where[i + last].end)
        if matched >= need and not _part_of_a_number(text, *span):
            found.append((-matched, i, span))
    for _, _, span in sorted(found):
        yield span


def _in_order(words: list[_Token], window: list[_Token]) -> tuple[int, int]:
    """Longest in-order matching of `words` in `window` (an LCS) and the window index of its last match."""
    rows = [[0] * (len(window) + 1) for _ in range(len(words) + 1)]
    for a, word in enumerate(words, 1):
        for b, token in enumerate(window, 1):
            rows[a][b] = rows[a - 1][b - 1] + 1 if _similar(word, token) else max(rows[a - 1][b], rows[a][b - 1])
    total = rows[-1][-1]
    last = next((b for b in range(1, len(window) + 1) if rows[-1][b] == total), 1)
    return total, last - 1


def _similar(a: _Token, b: _Token) -> bool:
    """Tokens that match fuzzily: equal once accents are folded, or (4+ letters, no digit) one small edit."""
    if a.fold == b.fold:
        return True
    if min(len(a.fold), len(b.fold)) < 4 or any(c.isdigit() for c in a.fold + b.fold):
        return False  # ids and numbers never match approximately: 12345 is not 12346
    return difflib.SequenceMatcher(None, a.fold, b.fold).ratio() >= TOKEN_SIMILARITY


# --- numbers -------------------------------------------------------------------------------------------

# a number; "1 295" / "12 500,50" (a space, no-break or thin space before each group of three) is one
_SPACED = "[ \u00a0\u202f]"
_NUMBER = re.compile(rf"\d{{1,3}}(?:{_SPACED}\d{{3}})+(?:,\d{{1,2}})?(?![\d.,']?\d)|\d+(?:[.,']\d+)*")
_WORDS = {w: i for i, w in enumerate(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                      "nine", "ten", "eleven", "twelve"])}
_WORDS.update({w: i for i, w in enumerate(["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben",
                                           "acht", "neun", "zehn"]) if i})


# ISO 4217 codes and words an amount may carry; any other letters glued to digits make an id ("BW10421", "X200")
_CURRENCIES = frozenset({
    "usd", "eur", "gbp", "chf", "jpy", "cny", "rmb", "cad", "aud", "nzd", "sek", "nok", "dkk", "pln", "czk", "huf",
    "inr", "brl", "mxn", "zar", "krw", "sgd", "hkd", "try", "kr", "fr", "sfr", "euro", "euros", "dollar", "dollars",
    "pound", "pounds", "yen", "franc", "francs", "rupee", "rupees"})
_LETTERS_BEFORE = re.compile(rf"(?:(?![{_CJK}])[^\W\d_])+$")  # CJK text writes numbers without spaces


def _ground_number(value: float, text: str) -> Iterator[Grounding]:
    dates = [(start, end) for start, end, *_ in _date_mentions(text)]
    for match in _NUMBER.finditer(text):
        if _in_a_code(text, match.start()) or any(a < match.end() and match.start() < b for a, b in dates):
            continue  # an id's tail, or a day, month or year of a date ("2" in "2026年2月9日")
        if any(_same_number(value, c) for c in _readings(match.group())):
            yield Grounding(EXACT, (match.start(), match.end()))
    for token in _tokens(text):
        if token.norm in _WORDS and _same_number(value, _WORDS[token.norm]):
            yield Grounding(FUZZY, (token.start, token.end))


def _in_a_code(text: str, start: int) -> bool:
    """Whether the digits at `start` are glued to letters before them that name no currency: the tail of
    an id or a code ("BW10421", "X200"), not a number. Letters after are a unit or an ordinal ("10kg", "3rd")."""
    glued = _LETTERS_BEFORE.search(text, max(0, start - 16), start)  # a longer run is no currency either
    return glued is not None and glued.group().casefold() not in _CURRENCIES


def _readings(written: str) -> set[float]:
    """The numbers a digit string can mean: "1,234.50" (English), "1.234,50" (German), "29,90" (a decimal
    comma), "1'234" (Swiss); a string neither reading parses ("15.01.2026") gives each of its groups."""
    out: set[float] = set()
    written = re.sub(_SPACED, "", written)
    for thousands, decimal in ((",", "."), (".", ","), ("'", ".")):
        plain = written.replace(thousands, "").replace(decimal, ".")
        if re.fullmatch(r"\d+(?:\.\d+)?", plain):
            out.add(float(plain))
    return out or {float(g) for g in re.split(r"[.,']", written)}


def _same_number(value: float, written: float) -> bool:
    return abs(abs(value) - written) <= 1e-9 * max(1.0, abs(value))


def _amount(value: str) -> float | None:
    """The number of an amount written as a string ("$29.90", "EUR 12,50", "59 euros"): None when it holds
    no one number, or letters that name no currency ("BW10421" is an id, "No. 10421" a reference: reading
    their digits alone grounded them on any "10421" of the text)."""
    found = _NUMBER.findall(value)
    words = re.findall(r"[^\W\d_]+", value)
    if len(found) != 1 or any(w.casefold() not in _CURRENCIES for w in words):
        return None
    groups = re.split(r"[.,']", found[0])
    if len(groups) > 1 and len(groups[-1]) <= 2:  # the last separator before 1-2 digits is the decimal one
        return float("".join(groups[:-1]) + "." + groups[-1])
    return float("".join(groups))


# --- dates ---------------------------------------------------------------------------------------------

_MONTHS = {
    1: "january jan januar janvier enero ene", 2: "february feb februar février fevrier febrero",
    3: "march mar märz maerz mär mars marzo", 4: "april apr avril abril abr",
    5: "may mai mayo", 6: "june jun juni juin junio", 7: "july jul juli juillet julio",
    8: "august aug août aout agosto ago", 9: "september sep sept septembre septiembre",
    10: "october oct oktober okt octobre octubre", 11: "november nov novembre noviembre",
    12: "december dec dezember dez décembre decembre diciembre dic",
}
_MORE_MONTHS = {  # Italian, Portuguese, Dutch, Swedish, Danish and Norwegian names the list above lacks
    1: "gennaio janeiro januari", 2: "febbraio fevereiro februari", 3: "março maart marts", 4: "aprile",
    5: "maggio maio mei maj", 6: "giugno junho", 7: "luglio julho", 8: "augustus augusti", 9: "settembre setembro",
    10: "ottobre outubro", 12: "dicembre dezembro desember",
}
_MONTH_OF = {name: month for table in (_MONTHS, _MORE_MONTHS) for month, names in table.items()
             for name in names.split()}
_MONTH = "|".join(sorted(map(re.escape, _MONTH_OF), key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th|er|\.)?"
_DATES = [  # (pattern, the order of its groups)
    (re.compile(r"(?<!\d)(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})(?!\d)"), "ymd"),
    (re.compile(r"(?<!\d)(\d{1,2})[-/.](\d{1,2})[-/.](\d{4}|\d{2})(?!\d)"), "dmy"),
    (re.compile(rf"(?<!\d)(\d{{1,2}}){_ORD}\s*(?:of\s+|de\s+)?({_MONTH})\b(?:\.?,?\s*(?:de\s+)?(\d{{4}}))?", re.I),
     "dMy"),
    (re.compile(rf"\b({_MONTH})\b\.?\s+(\d{{1,2}}){_ORD}(?!\d)(?:,?\s*(\d{{4}}))?", re.I), "Mdy"),
    (re.compile(r"(?:(\d{4})\s*年\s*)?(\d{1,2})\s*月\s*(\d{1,2})\s*日"), "ymd"),
]


def _ground_date(value: dt.date, text: str) -> Iterator[Grounding]:
    yearless = []
    for start, end, year, month, day in _date_mentions(text):
        if (month, day) != (value.month, value.day) or (year is not None and year != value.year):
            continue
        if year is not None:
            yield Grounding(EXACT, (start, end))
        else:
            yearless.append(Grounding(FUZZY, (start, end)))
    yield from yearless


def _date_mentions(text: str) -> Iterator[tuple[int, int, int | None, int, int]]:
    """Every date the text writes, as (start, end, year or None, month, day); a numeric d/m/y is read both
    ways (15/01 and 01/15 both stand for January 15th)."""
    for pattern, order in _DATES:
        for match in pattern.finditer(text):
            groups = dict(zip(order, match.groups(), strict=True))
            year = _year(groups.get("y"))
            if "M" in groups:
                readings = [(_MONTH_OF[groups["M"].casefold()], int(groups["d"]))]
            elif order == "dmy":
                a, b = int(groups["d"]), int(groups["m"])
                readings = [(b, a), (a, b)]
            else:
                readings = [(int(groups["m"]), int(groups["d"]))]
            for month, day in readings:
                if 1 <= month <= 12 and 1 <= day <= 31:
                    yield match.start(), match.end(), year, month, day


def _year(written: str | None) -> int | None:
    if not written:
        return None
    year = int(written)
    return year + 2000 if year < 100 else year


def _iso_date(value: str) -> dt.date | None:
    """The date of an ISO date or datetime string, else None."""
    try:
        return dt.datetime.fromisoformat(value).date() if "T" in value or " " in value.strip() \
            else dt.date.fromisoformat(value)
    except ValueError:
        return None


# --- kinds: which spans can be a field's value ----------------------------------------------------------

# units a number may carry that make it a measurement or a duration, never an amount of money nor an id
_UNITS = frozenset({
    "%", "‰", "°", "\"", "″", "mm", "cm", "m", "km", "inch", "inches", "ft", "feet", "foot", "g", "kg", "mg", "lb",
    "lbs", "oz", "ml", "l", "liter", "liters", "litre", "litres", "kb", "mb", "gb", "tb", "mbps", "gbps", "w", "kw",
    "v", "mah", "wh", "kwh", "hz", "khz", "mhz", "ghz", "px", "dpi", "degrees", "sec", "secs", "second", "seconds",
    "min", "mins", "minute", "minutes", "h", "hr", "hrs", "hour", "hours", "day", "days", "week", "weeks", "month",
    "months", "year", "years", "yr", "yrs", "tag", "tage", "stunde", "stunden", "jahr", "jahre", "woche", "wochen",
    "jour", "jours", "heure", "heures", "ans", "semaine", "semaines", "día", "días", "hora", "horas", "año", "años",
    "giorno", "giorni", "ore", "anno", "anni", "dia", "dias", "ano", "anos", "dag", "dagen", "uur", "jaar", "dagar",
    "timmar", "år", "dni", "godzin", "lat",  # and CJK units by their first character (a CJK token is one):
    "時", "分", "秒", "歳", "天", "小", "公", "个", "個", "台", "件", "枚", "本", "개", "시", "분", "년", "살"})
# currency signs and words: a number next to one is an amount ("18 euros", "$18", "250 AED", "680元")
_MONEY = _CURRENCIES | {"元", "円", "원", "zł", "zl", "kn", "ft", "tl", "lei", "rs"}
_NUMBER_SIGN = re.compile(r"(?:#|№|\b(?:no|nr|n[°º])\.?)\s*$", re.I)  # "#18", "No. 18", "Nr. 18", "n° 18"
# lowercase words a person's name may hold: "Sanne de Vries", "Ludwig van Beethoven", "Ibn al-Haytham"
_PARTICLES = frozenset({"de", "del", "della", "der", "den", "di", "da", "das", "do", "dos", "du", "la", "le", "van",
                        "von", "ten", "ter", "zu", "y", "e", "bin", "ibn", "al", "el", "d", "l", "af", "av", "st"})


def fits(kind: Kind, text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` can be a value of `kind` (`kind_of`): an identifier, a person's name and an
    amount have rules (`_identifier`, `_person_name`, `_amount_span`); every other kind fits any span its
    alignment found (a date is aligned only with dates, a number with numbers)."""
    rule = {"identifier": _identifier, "person_name": _person_name, "amount": _amount_span}.get(kind)
    return rule is None or rule(text, start, end)


def _identifier(text: str, start: int, end: int) -> bool:
    """An id holds a digit or is a code in capitals ("QX7B", "ABCDEF"), never a word ("one", "blue") nor a
    date or a piece of one; a bare number is an id unless it is the number of an amount ("18 euros", "$18"),
    a measurement ("42 mm", "3 days"), or a short count: fewer than four digits without a number sign
    ("size 42", "3 keys"; "#18" and "No. 18" are ids)."""
    span = text[start:end]
    if not any(c.isdigit() for c in span) and any(c.islower() for c in span):
        return False
    if any(a <= start and end <= b for a, b, *_ in _date_mentions(text)):
        return False  # a date, or a piece of one ("24 July 2026" for an id "2026-07-24")
    if not re.fullmatch(r"\d[\d.,' \u00a0\u202f]*", span):
        return True
    if _money_beside(text, start, end) or _unit_after(text, end):
        return False
    return sum(c.isdigit() for c in span) >= 4 or bool(_NUMBER_SIGN.search(text, 0, start))


def _person_name(text: str, start: int, end: int) -> bool:
    """A person's name holds no digit and, in a cased script, capitals: some word starts with one, and its
    other words are capitalised too or particles ("Sanne de Vries"), so "student", "blue" and "Child
    trailer with a torn cover" are no names. A name in an uncased script (kanji, hangul) or in a text written
    without any capital ("hi its jordan here") is not judged by case."""
    span = text[start:end]
    if any(c.isdigit() for c in span):
        return False
    cased = [w for w in re.findall(r"[^\W\d_]+", span) if w.lower() != w.upper()]
    if not cased or not any(c.isupper() for c in text):
        return True
    lower = [w for w in cased if w[0].islower()]
    return len(lower) < len(cased) and all(w.casefold() in _PARTICLES for w in lower)


def _amount_span(text: str, start: int, end: int) -> bool:
    """An amount of money is not a measurement ("80%", "256 GB", "3 days") unless a currency stands beside
    it, and a number word is one only beside a currency ("ten euros"; "two phones" counts phones)."""
    if not any(c.isdigit() for c in text[start:end]):
        return _money_beside(text, start, end)
    return _money_beside(text, start, end) or not _unit_after(text, end)


def _money_beside(text: str, start: int, end: int) -> bool:
    """A currency sign or word just before or after the span ("$18", "EUR 18", "18 €", "18 euros", "250 AED")."""
    before, after = text[max(0, start - 12):start].rstrip(), text[end:end + 12].lstrip()
    if (before and unicodedata.category(before[-1]) == "Sc") or (after and unicodedata.category(after[0]) == "Sc"):
        return True
    word_before = re.search(r"[^\W\d_]+$", before)
    word_after = _TOKEN.match(after)
    return any(w is not None and _is_money(w.group()) for w in (word_before, word_after))


def _is_money(word: str) -> bool:
    return word.casefold() in _MONEY or (len(word) == 3 and word.isascii() and word.isupper())  # an ISO code


def _unit_after(text: str, end: int) -> bool:
    """A unit just after a number: "42 mm", "15.6-inch", "80%", "3 days", "5時間"."""
    after = re.sub(r"^[ \u00a0\u202f-]", "", text[end:end + 12])
    if after[:1] in _UNITS:
        return True
    word = _TOKEN.match(after)
    return word is not None and word.group().casefold() in _UNITS
