"""Trigger documents as the Azure host hands them over (`funcstack.functions_host._newtonsoft`):
date-like string values re-formatted as Newtonsoft.Json's default reading and writing do. The
cases follow Newtonsoft's own (DateTimeUtilsTests, JsonTextReaderTests) and the upstream
reports (Azure/Azure-Functions#1399, Azure/azure-functions-host#9610)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from funcstack.functions_host._newtonsoft import host_documents, host_string, host_time_zone

REFORMATTED = [
    # the reports: trailing zeros of the fraction cut, an offset converted to UTC (Azure's zone)
    ("2019-01-01T00:00:01.0000000Z", "2019-01-01T00:00:01Z"),
    ("2019-01-01T10:00:05.120000+02:00", "2019-01-01T08:00:05.12+00:00"),
    ("2019-01-01T10:00:05.120000-02:00", "2019-01-01T12:00:05.12+00:00"),
    # what Python's datetime.isoformat() writes (6 digits, +00:00)
    ("2026-11-24T21:47:02.123450+00:00", "2026-11-24T21:47:02.12345+00:00"),
    ("2026-11-24T21:47:02+00:00", "2026-11-24T21:47:02+00:00"),
    ("2026-11-24T21:47:02.000000+00:00", "2026-11-24T21:47:02+00:00"),
    # no zone: Kind Unspecified, written without one
    ("2000-12-15T22:11:03.055", "2000-12-15T22:11:03.055"),
    ("2000-12-15T22:11:03.0550000", "2000-12-15T22:11:03.055"),
    ("2000-12-15T22:11:03Z", "2000-12-15T22:11:03Z"),
    ("2000-12-15T22:11:03.055+11:30", "2000-12-15T10:41:03.055+00:00"),
    ("2000-12-15T22:11:03-1130", "2000-12-16T09:41:03+00:00"),
    ("2000-12-15T22:11:03+11", "2000-12-15T11:11:03+00:00"),
    ("2000-12-15T22:11:03z", "2000-12-15T22:11:03Z"),
    # 24:00:00 is the next day's midnight
    ("2000-12-15T24:00:00Z", "2000-12-16T00:00:00Z"),
    # seven digits kept, the smallest tick too
    ("2019-01-01T00:00:01.9999999Z", "2019-01-01T00:00:01.9999999Z"),
    ("2019-01-01T00:00:01.0000001Z", "2019-01-01T00:00:01.0000001Z"),
    # DateTime's range: clamped at its ends, as Newtonsoft does
    ("9999-12-31T23:59:59.9999999-11:30", "9999-12-31T23:59:59.9999999+00:00"),
    ("0001-01-01T00:00:00-12:00", "0001-01-01T12:00:00+00:00"),
    ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
    # the Microsoft format, written back as ISO
    ("/Date(1198908717056)/", "2007-12-29T06:11:57.056Z"),
    ("/Date(1198908717056+0100)/", "2007-12-29T06:11:57.056+00:00"),
    ("/Date(-1000)/", "1969-12-31T23:59:59Z"),
    # the parser's quirk: two digits after the seconds read as a zone's minutes
    ("2000-01-01T00:00:0012", "2000-01-01T00:00:00"),
]

VERBATIM = [
    "2019-01-01",  # no time
    "2019-01-01 00:00:01Z",  # a space, not T
    "x 2019-01-01T00:00:01Z",  # a date inside a longer string
    "2019-01-01T00:00:01Z and more",
    '{"at":"2019-01-01T00:00:01.0000000Z"}',  # JSON text in a string: the body's form
    "2019-13-01T00:00:01Z",  # no 13th month
    "2019-02-29T00:00:01Z",  # 2019 is no leap year
    "2000-12-15T24:01:00Z",
    "2000-12-15T24:00:00.0000001Z",
    "2000-12-15T22:11:03.Z",  # a point without digits
    "2019-01-01T00:00:01.12345678Z",  # an eighth digit
    "2000-12-15T22:11:60Z",
    "9999x12-31T23:59:59",
    "0000-01-01T00:00:00Z",  # year 0
    "2000-12-15T22:11:03.055+11:30 ",
    "/Date(abc)/",
    "/Date()/",
    "",
    "1",
]


@pytest.mark.parametrize(("given_text", "handed_over"), REFORMATTED)
def test_date_like_strings_are_written_as_newtonsoft_writes_them(
    given_text: str, handed_over: str
) -> None:
    assert host_string(given_text) == handed_over


@pytest.mark.parametrize("text", VERBATIM)
def test_other_strings_are_handed_over_as_they_are(text: str) -> None:
    assert host_string(text) == text


def test_only_values_are_read_as_dates_never_property_names() -> None:
    document = {
        "2019-01-01T00:00:01.0000000Z": "2019-01-01T00:00:01.0000000Z",
        "list": ["2019-01-01T00:00:01.100Z", 1, None, True, {"n": 1.5}],
        "body": '{"at":"2019-01-01T00:00:01.0000000Z"}',
    }
    assert host_documents([document]) == [
        {
            "2019-01-01T00:00:01.0000000Z": "2019-01-01T00:00:01Z",
            "list": ["2019-01-01T00:00:01.1Z", 1, None, True, {"n": 1.5}],
            "body": '{"at":"2019-01-01T00:00:01.0000000Z"}',
        }
    ]
    assert document["list"][0] == "2019-01-01T00:00:01.100Z"  # the given value is not changed


def test_the_host_time_zone_is_utc_unless_the_app_sets_tz() -> None:
    assert host_time_zone({}) is dt.UTC
    assert host_time_zone({"TZ": "Nowhere/Else"}) is dt.UTC
    paris = host_time_zone({"TZ": "Europe/Paris"})
    assert paris == ZoneInfo("Europe/Paris")
    # an offset converted to the host's zone and written with its offset; Z stays UTC
    assert host_string("2019-07-01T10:00:00+02:00", paris) == "2019-07-01T10:00:00+02:00"
    assert host_string("2019-01-01T10:00:00+02:00", paris) == "2019-01-01T09:00:00+01:00"
    assert host_string("2019-01-01T10:00:00Z", paris) == "2019-01-01T10:00:00Z"


@given(
    st.datetimes(
        min_value=dt.datetime(1, 1, 2),
        max_value=dt.datetime(9999, 12, 30),
        timezones=st.sampled_from(
            [
                dt.UTC,
                dt.timezone(dt.timedelta(hours=5, minutes=30)),
                dt.timezone(dt.timedelta(hours=-8)),
            ]
        ),
    ),
    st.sampled_from(["auto", "seconds", "milliseconds", "microseconds"]),
)
def test_a_python_timestamp_keeps_its_instant_whatever_its_form(
    moment: dt.datetime, timespec: str
) -> None:
    written = moment.isoformat(timespec=timespec)
    handed_over = host_string(written)
    read_back = dt.datetime.fromisoformat(handed_over)
    assert read_back.utcoffset() == dt.timedelta(0)
    expected = moment.replace(microsecond=0) if timespec == "seconds" else moment
    if timespec == "milliseconds":
        expected = moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    assert read_back == expected
