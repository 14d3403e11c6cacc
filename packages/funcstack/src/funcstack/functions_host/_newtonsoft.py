"""Cosmos DB trigger documents as the Azure Functions host hands them to a Python worker.

The Cosmos DB extension reads the change feed with Newtonsoft.Json, whose default
``DateParseHandling.DateTime`` turns every string VALUE that looks like a date into a
``DateTime``; the host then writes the documents back to JSON for the worker
(``TypedData.json``) with Newtonsoft's default ``IsoDateFormat``. A date-like string therefore
reaches the function re-formatted: ``"2019-01-01T00:00:01.0000000Z"`` as
``"2019-01-01T00:00:01Z"``, ``"2019-01-01T10:00:05.120000+02:00"`` as
``"2019-01-01T08:00:05.12+00:00"`` (converted to the host's time zone, UTC in Azure, and
trailing zeros of the fraction cut). Open upstream: Azure/Azure-Functions#1399,
Azure/azure-functions-host#9610.

What is re-formatted, as Newtonsoft.Json 13 does it (``JsonTextReader.ParseReadString``,
``DateTimeUtils.TryParseDateTime`` / ``TryParseDateTimeIso`` / ``TryParseDateTimeMicrosoft``,
``DateTimeParser``, ``DateTimeUtils.WriteDateTimeString`` / ``WriteDefaultIsoDate``):

* string values (never property names) of 19 to 40 characters whose first is a digit and
  whose 11th is ``T``, when the whole string is ``yyyy-MM-ddTHH:mm:ss`` with an optional
  fraction (1 to 7 digits) and an optional zone (``Z``, ``+HH:mm``, ``-HHmm``, ``+HH``): a
  date inside a longer string, JSON text inside a string, a date without its time are left
  alone;
* ``"/Date(<milliseconds since 1970>[+-HHmm])/"`` (the Microsoft format);
* written back as ``yyyy-MM-ddTHH:mm:ss`` plus the fraction without its trailing zeros (none
  when it is zero), then ``Z`` for a UTC date, the host's offset (``+00:00`` in Azure) for a
  date that had an offset (converted to the host's time zone), nothing for a date that had no
  zone. ``24:00:00`` is the next day's midnight.

Pure: JSON values in, JSON values out, the same for any caller. The host's time zone is UTC,
as in Azure, unless the app sets ``TZ`` (the setting Linux plans read) to an IANA zone name.
"""

from __future__ import annotations

import calendar
import datetime as dt
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["VERBATIM_SETTING", "host_documents", "host_string", "host_time_zone"]

#: Local-only app setting: "true" hands Cosmos DB documents to the function verbatim (the
#: trigger's and the input binding's), where the Azure host re-formats their date-like strings.
VERBATIM_SETTING = "FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS"

#: .NET's ``DateTime.Ticks`` units: 100 ns; ``DateTime.MaxValue.Ticks``.
_TICKS_PER_SECOND = 10_000_000
_TICKS_PER_DAY = 86_400 * _TICKS_PER_SECOND
_MAX_TICKS = 3_155_378_975_999_999_999
#: ``DateTime(1970, 1, 1).Ticks``: the Microsoft format counts milliseconds from there.
_EPOCH_TICKS = 621_355_968_000_000_000
_FRACTION_DIGITS = 7

_UTC, _LOCAL, _UNSPECIFIED = "utc", "local", "unspecified"


def host_time_zone(settings: dict[str, str] | None = None) -> dt.tzinfo:
    """The host's time zone: ``TZ`` from the app's settings when it names a zone, else UTC
    (Azure's)."""
    name = (settings or {}).get("TZ", "").strip()
    if not name:
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return dt.UTC


def host_documents(value: Any, zone: dt.tzinfo = dt.UTC) -> Any:
    """``value`` (parsed JSON) with every date-like string value re-formatted as the Azure host
    hands it over; a new structure (``value`` is not changed)."""
    if isinstance(value, str):
        return host_string(value, zone)
    if isinstance(value, dict):
        return {key: host_documents(item, zone) for key, item in value.items()}
    if isinstance(value, list):
        return [host_documents(item, zone) for item in value]
    return value


def host_string(text: str, zone: dt.tzinfo = dt.UTC) -> str:
    """One string value as the Azure host hands it over: re-formatted when Newtonsoft reads it
    as a date, else as it is."""
    parsed = _read_date(text, zone)
    if parsed is None:
        return text
    ticks, kind = parsed
    return _write_date(ticks, kind, zone)


# -- reading (JsonTextReader with DateParseHandling.DateTime, DateTimeZoneHandling.RoundtripKind)


def _read_date(text: str, zone: dt.tzinfo) -> tuple[int, str] | None:
    """(ticks, kind) of the DateTime Newtonsoft reads from ``text``, or None for a string."""
    if not text:
        return None
    if text[0] == "/":
        if len(text) >= 9 and text.startswith("/Date(") and text.endswith(")/"):
            return _read_microsoft(text, zone)
        return None
    # .NET's string lengths count UTF-16 units: a date is ASCII, and a string with characters
    # outside the BMP fails the parse below whichever way it is counted
    if 19 <= len(text) <= 40 and text[0].isdigit() and text[10] == "T":
        return _read_iso(text, zone)
    return None


class _Fields:
    """``DateTimeParser``'s fields."""

    def __init__(self) -> None:
        self.year = self.month = self.day = 0
        self.hour = self.minute = self.second = self.fraction = 0
        self.zone_hour = self.zone_minute = 0
        self.zone = _UNSPECIFIED
        self.west = False


def _digits(text: str, start: int, count: int, end: int) -> int | None:
    if start + count - 1 >= end:
        return None
    chunk = text[start : start + count]
    if len(chunk) != count or not all("0" <= c <= "9" for c in chunk):
        return None
    return int(chunk)


def _char(text: str, at: int, end: int, expected: str) -> bool:
    return at < end and text[at] == expected


def _parse(text: str) -> _Fields | None:
    """``DateTimeParser.Parse``: ``yyyy-MM-ddTHH:mm:ss[.f{1,7}][zone]``, nothing after it."""
    end = len(text)
    f = _Fields()
    year, month, day = _digits(text, 0, 4, end), _digits(text, 5, 2, end), _digits(text, 8, 2, end)
    if (
        year is None
        or year < 1
        or not _char(text, 4, end, "-")
        or month is None
        or not 1 <= month <= 12
        or not _char(text, 7, end, "-")
        or day is None
        or not 1 <= day <= calendar.monthrange(year, month)[1]
        or not _char(text, 10, end, "T")
    ):
        return None
    f.year, f.month, f.day = year, month, day
    hour, minute, second = (
        _digits(text, 11, 2, end),
        _digits(text, 14, 2, end),
        _digits(text, 17, 2, end),
    )
    if (
        hour is None
        or hour > 24
        or not _char(text, 13, end, ":")
        or minute is None
        or minute >= 60
        or not _char(text, 16, end, ":")
        or second is None
        or second >= 60
        or (hour == 24 and (minute or second))
    ):
        return None
    f.hour, f.minute, f.second = hour, minute, second
    at = 19
    if _char(text, at, end, "."):
        fraction = digits = 0
        at += 1
        while at < end and digits < _FRACTION_DIGITS and "0" <= text[at] <= "9":
            fraction = fraction * 10 + int(text[at])
            digits += 1
            at += 1
        if digits == 0:
            return None
        f.fraction = fraction * 10 ** (_FRACTION_DIGITS - digits)
        if hour == 24 and f.fraction:
            return None
    return f if _parse_zone(text, at, end, f) else None


def _parse_zone(text: str, at: int, end: int, f: _Fields) -> bool:
    """``DateTimeParser.ParseZone``: ``Z``/``z``, or ``+``/``-`` with two digits, then an
    optional ``:`` and two digits; the text must end there."""
    if at < end:
        ch = text[at]
        if ch in "Zz":
            f.zone = _UTC
            at += 1
        else:
            zone_hour = _digits(text, at + 1, 2, end) if at + 2 < end else None
            if zone_hour is not None and ch in "+-":
                f.zone, f.west, f.zone_hour = _LOCAL, ch == "-", zone_hour
                at += 3
            if at < end:
                if _char(text, at, end, ":"):
                    at += 1
                zone_minute = _digits(text, at, 2, end) if at + 1 < end else None
                if zone_minute is not None:
                    f.zone_minute = zone_minute
                    at += 2
    return at == end


def _read_iso(text: str, zone: dt.tzinfo) -> tuple[int, str] | None:
    """``TryParseDateTimeIso``: the parsed fields as a DateTime; an offset is converted to the
    host's time zone (Kind Local), ``Z`` is Kind Utc, no zone Kind Unspecified."""
    f = _parse(text)
    if f is None:
        return None
    midnight = f.hour == 24
    day = dt.date(f.year, f.month, f.day).toordinal() - 1 + (1 if midnight else 0)
    ticks = (
        day * _TICKS_PER_DAY
        + ((0 if midnight else f.hour) * 3600 + f.minute * 60 + f.second) * _TICKS_PER_SECOND
        + f.fraction
    )
    if ticks > _MAX_TICKS:  # 9999-12-31T24:00:00: .NET's AddDays throws; the reader fails
        return None
    if f.zone == _UTC:
        return ticks, _UTC
    if f.zone == _UNSPECIFIED:
        return ticks, _UNSPECIFIED
    offset = (f.zone_hour * 3600 + f.zone_minute * 60) * _TICKS_PER_SECOND
    utc = ticks + offset if f.west else ticks - offset
    if 0 <= utc <= _MAX_TICKS:
        return _to_local(utc, zone), _LOCAL
    # out of DateTime's range as UTC: the host's offset at the written time added to it, then
    # clamped (the written time is Kind Unspecified, which GetUtcOffset takes as local)
    local = utc + _local_offset_of(ticks, zone)
    return min(max(local, 0), _MAX_TICKS), _LOCAL


def _read_microsoft(text: str, zone: dt.tzinfo) -> tuple[int, str] | None:
    """``TryParseDateTimeMicrosoft``: ``/Date(ms)/`` is Kind Utc; with an offset after the
    milliseconds it is Kind Local (the UTC instant in the host's zone; the offset itself only
    has to be readable)."""
    inner_end = len(text) - 2
    sign_at = next((i for i in range(7, inner_end) if text[i] == "+"), -1)
    if sign_at == -1:
        sign_at = next((i for i in range(7, inner_end) if text[i] == "-"), -1)
    kind = _UTC
    digits_end = inner_end
    if sign_at != -1:
        kind = _LOCAL
        if _digits(text, sign_at + 1, 2, len(text)) is None:
            return None
        if len(text) - sign_at > 5 and _digits(text, sign_at + 3, 2, len(text)) is None:
            return None
        digits_end = sign_at
    number = text[6:digits_end]
    if (
        not number
        or not (number.isascii() and number.lstrip("-").isdigit())
        or number.count("-") > 1
        or (number.startswith("-") and len(number) == 1)
    ):
        return None
    utc = int(number) * 10_000 + _EPOCH_TICKS
    if not 0 <= utc <= _MAX_TICKS:
        return None
    return (_to_local(utc, zone), _LOCAL) if kind == _LOCAL else (utc, _UTC)


def _offset_ticks(ticks: int, zone: dt.tzinfo) -> int:
    """The host zone's UTC offset at the UTC instant ``ticks``."""
    if zone is dt.UTC:
        return 0
    instant = _as_datetime(ticks).replace(tzinfo=dt.UTC)
    offset = instant.astimezone(zone).utcoffset() or dt.timedelta(0)
    return int(offset.total_seconds()) * _TICKS_PER_SECOND


def _to_local(utc: int, zone: dt.tzinfo) -> int:
    """``DateTime.ToLocalTime`` of a UTC instant, clamped to DateTime's range."""
    return min(max(utc + _offset_ticks(utc, zone), 0), _MAX_TICKS)


def _as_datetime(ticks: int) -> dt.datetime:
    days, rest = divmod(ticks, _TICKS_PER_DAY)
    seconds, fraction = divmod(rest, _TICKS_PER_SECOND)
    return dt.datetime.combine(dt.date.fromordinal(days + 1), dt.time()) + dt.timedelta(
        seconds=seconds, microseconds=fraction // 10
    )


# -- writing (DateFormatHandling.IsoDateFormat) ------------------------------------------------


def _write_date(ticks: int, kind: str, zone: dt.tzinfo) -> str:
    """``WriteDateTimeString``: ``WriteDefaultIsoDate``, then ``Z`` (Utc), the local offset
    ``+HH:mm`` (Local), or nothing (Unspecified)."""
    days, rest = divmod(ticks, _TICKS_PER_DAY)
    seconds, fraction = divmod(rest, _TICKS_PER_SECOND)
    day = dt.date.fromordinal(days + 1)
    hour, rest_seconds = divmod(seconds, 3600)
    minute, second = divmod(rest_seconds, 60)
    out = f"{day.year:04d}-{day.month:02d}-{day.day:02d}T{hour:02d}:{minute:02d}:{second:02d}" + (
        f".{fraction:07d}".rstrip("0") if fraction else ""
    )
    suffix: Callable[[], str] = {
        _UTC: lambda: "Z",
        _LOCAL: lambda: _offset_text(_local_offset_of(ticks, zone)),
        _UNSPECIFIED: lambda: "",
    }[kind]
    return out + suffix()


def _local_offset_of(local_ticks: int, zone: dt.tzinfo) -> int:
    """``DateTime.GetUtcOffset`` of a Kind Local value: the zone's offset at that local time."""
    if zone is dt.UTC:
        return 0
    offset = _as_datetime(local_ticks).replace(tzinfo=zone).utcoffset() or dt.timedelta(0)
    return int(offset.total_seconds()) * _TICKS_PER_SECOND


def _offset_text(offset_ticks: int) -> str:
    sign = "+" if offset_ticks >= 0 else "-"
    minutes = abs(offset_ticks) // (60 * _TICKS_PER_SECOND)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
