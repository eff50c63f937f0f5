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

Every span is a (start, end) pair of offsets into the original text: `text[start:end]` is what matched.
*not_found* does not prove a value wrong (a right value may be paraphrased: "money back" for "refund"),
and *exact* does not prove it right (a number may be written in the text for another reason).
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

__all__ = ["EXACT", "EXEMPT", "FLAG", "FUZZY", "FUZZY_THRESHOLD", "NOT_FOUND", "STATUSES", "TOKEN_SIMILARITY",
           "Grounding", "Kind", "ground", "ground_fields", "kind_of"]

EXACT, FUZZY, NOT_FOUND, EXEMPT = "exact", "fuzzy", "not_found", "exempt"
STATUSES = (EXACT, FUZZY, NOT_FOUND, EXEMPT)
FLAG = "x-grounding"  # a schema property with `"x-grounding": false` is exempt (a field the text never quotes)
# a fuzzy match needs this share of the value's tokens, matched in order: with 1-3 tokens, all of them
FUZZY_THRESHOLD = 0.75
# two tokens (accents folded, 4+ letters, no digit) match fuzzily from this difflib ratio: one typo in six
TOKEN_SIMILARITY = 0.8
Kind = Literal["string", "number", "date", "exempt"]


@dataclass(frozen=True, slots=True)
class Grounding:
    """Where a value is written in its text: its status and the span `text[start:end]` (None if not found)."""

    status: str
    span: tuple[int, int] | None = None

    @property
    def grounded(self) -> bool:
        return self.status in (EXACT, FUZZY)


_NOT_FOUND = Grounding(NOT_FOUND)


def kind_of(prop: Mapping[str, Any]) -> Kind:
    """How a JSON Schema property's values are aligned: by tokens, as numbers, as dates, or not at all."""
    if prop.get(FLAG) is False:
        return "exempt"
    subs = [prop, *prop.get("anyOf", []), *prop.get("oneOf", [])]
    if any(s.get(FLAG) is False or "enum" in s or "const" in s for s in subs):
        return "exempt"
    kinds = set()
    for sub in subs:
        kind = sub.get("type")
        kinds |= set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()
    kinds.discard("null")
    if kinds <= {"integer", "number"} and kinds:
        return "number"
    if kinds == {"string"}:
        formats = {s.get("format") for s in subs}
        return "date" if formats & {"date", "date-time"} else "string"
    return "exempt"  # booleans, arrays, objects, mixed types


def ground_fields(values: Mapping[str, Any], text: str | None, properties: Mapping[str, Mapping[str, Any]]
                  ) -> dict[str, Grounding | None]:
    """Per field of an answer that the text may quote (not exempt), its grounding (None: no value)."""
    kinds = {field: kind_of(prop) for field, prop in properties.items()}
    return {field: ground(values.get(field), text, kind) for field, kind in kinds.items() if kind != "exempt"}


def ground(value: Any, text: str | None, kind: Kind = "string") -> Grounding | None:
    """Align `value` with `text`; None for a missing value (nothing to ground)."""
    if value is None or (isinstance(value, float) and value != value):
        return None
    if kind == "exempt" or isinstance(value, bool):
        return Grounding(EXEMPT)
    if not text:
        return _NOT_FOUND
    if kind == "number" or isinstance(value, int | float):
        return _ground_number(float(value), text)
    if isinstance(value, dt.date):
        return _ground_date(value, text)
    value = str(value)
    if kind == "date":
        day = _iso_date(value)
        return _ground_date(day, text) if day is not None else _ground_string(value, text)
    found = _ground_string(value, text)
    if found.status != NOT_FOUND:
        return found
    number, day = _amount(value), _iso_date(value)
    if day is not None:
        return _ground_date(day, text)
    return _ground_number(number, text) if number is not None else found


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


def _ground_string(value: str, text: str) -> Grounding:
    words, where = _tokens(value), _tokens(text)
    if not words:
        return _NOT_FOUND
    span = _exact(words, where, text)
    if span is not None:
        return Grounding(EXACT, span)
    span = _fuzzy(words, where, text)
    return Grounding(FUZZY, span) if span is not None else _NOT_FOUND


def _exact(words: list[_Token], where: list[_Token], text: str) -> tuple[int, int] | None:
    """The first run of text tokens whose concatenation is the value's: separators and spaces ignored,
    tokens kept whole (so "BRW-10421", "BRW 10421" and "BRW10421" are one id, "10421" inside "110421" is not),
    and never a part of a number ("1" is not written in "$1,150.00", nor "02" in "12.02.2026")."""
    compact = "".join(w.norm for w in words)
    for i, first in enumerate(where):
        if not compact.startswith(first.norm):
            continue
        joined = ""
        for j in range(i, len(where)):
            joined += where[j].norm
            if joined == compact and not _part_of_a_number(text, first.start, where[j].end):
                return first.start, where[j].end
            if not compact.startswith(joined):
                break
    return None


def _part_of_a_number(text: str, start: int, end: int) -> bool:
    """Whether `text[start:end]` is glued to more digits by a number's separator (".", ",", "'")."""
    return bool(re.search(r"\d[.,']$", text[max(0, start - 2):start]) and text[start].isdigit()) or bool(
        re.match(r"[.,']\d", text[end:end + 2]) and text[end - 1].isdigit())


def _fuzzy(words: list[_Token], where: list[_Token], text: str) -> tuple[int, int] | None:
    """The best window of text tokens holding at least FUZZY_THRESHOLD of the value's tokens in order,
    never a part of a number."""
    n = len(words)
    need = math.ceil(FUZZY_THRESHOLD * n - 1e-9)  # 1, 2, 3 of 1-3 tokens; 3 of 4; 4 of 5
    width = n + max(1, n // 2)
    best: tuple[int, tuple[int, int]] | None = None
    for i in range(len(where)):
        if not any(_similar(w, where[i]) for w in words):
            continue  # a window starts on a matched token
        matched, last = _in_order(words, where[i:i + width])
        span = (where[i].start, where[i + last].end)
        if matched >= need and (best is None or matched > best[0]) and not _part_of_a_number(text, *span):
            best = (matched, span)
    return best[1] if best else None


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


def _ground_number(value: float, text: str) -> Grounding:
    dates = [(start, end) for start, end, *_ in _date_mentions(text)]
    for match in _NUMBER.finditer(text):
        if _in_a_code(text, match.start()) or any(a < match.end() and match.start() < b for a, b in dates):
            continue  # an id's tail, or a day, month or year of a date ("2" in "2026年2月9日")
        if any(_same_number(value, c) for c in _readings(match.group())):
            return Grounding(EXACT, (match.start(), match.end()))
    for token in _tokens(text):
        if token.norm in _WORDS and _same_number(value, _WORDS[token.norm]):
            return Grounding(FUZZY, (token.start, token.end))
    return _NOT_FOUND


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


def _ground_date(value: dt.date, text: str) -> Grounding:
    yearless = None
    for start, end, year, month, day in _date_mentions(text):
        if (month, day) != (value.month, value.day) or (year is not None and year != value.year):
            continue
        if year is not None:
            return Grounding(EXACT, (start, end))
        yearless = yearless or (start, end)
    return Grounding(FUZZY, yearless) if yearless else _NOT_FOUND


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
