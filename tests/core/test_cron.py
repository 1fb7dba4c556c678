"""Cron jobs: crontab weekdays as users mean them, timezones, intervals, one-shot times and
validation with a readable reason."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from squidd.core.cron import (
    JobListError,
    following_run,
    make_job,
    parse_interval,
    with_job,
    without_job,
)

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday


def job(**kwargs: str) -> object:
    return make_job("j", "p", timezone=kwargs.pop("timezone", "UTC"), target="", now=NOW, **kwargs)


@pytest.mark.parametrize(
    ("expr", "weekday"),
    [("0 8 * * 0", 6), ("0 8 * * 7", 6), ("0 8 * * 1", 0), ("0 8 * * sun", 6), ("0 8 * * 5", 4)],
)
def test_cron_weekdays_follow_crontab(expr: str, weekday: int) -> None:
    first = make_job("j", "p", cron=expr, timezone="UTC", target="", now=NOW).next_run
    assert first is not None and first.weekday() == weekday and first.hour == 8


def test_weekday_ranges_and_steps() -> None:
    j = make_job("j", "p", cron="0 9 * * 1-5", timezone="UTC", target="", now=NOW)
    runs = []
    at = NOW
    for _ in range(10):
        nxt = following_run(j, at)
        assert nxt is not None
        runs.append(nxt.weekday())
        at = nxt
    assert set(runs) == {0, 1, 2, 3, 4}
    weekend = make_job("w", "p", cron="0 9 * * 0,6", timezone="UTC", target="", now=NOW)
    assert weekend.next_run is not None and weekend.next_run.weekday() == 5


def test_cron_in_a_timezone() -> None:
    j = make_job("j", "p", cron="0 8 * * *", timezone="Europe/Berlin", target="", now=NOW)
    assert j.next_run == datetime(2026, 3, 3, 7, 0, tzinfo=UTC)


def test_every_and_at() -> None:
    every = make_job("e", "p", every="30m", timezone="UTC", target="", now=NOW)
    assert every.next_run == NOW + timedelta(minutes=30)
    assert following_run(every, NOW + timedelta(minutes=30)) == NOW + timedelta(minutes=60)
    at = make_job("a", "p", at="2026-03-02T14:00", timezone="Europe/Paris", target="", now=NOW)
    assert at.next_run == datetime(2026, 3, 2, 13, 0, tzinfo=UTC)
    assert following_run(at, NOW + timedelta(hours=2)) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, "invalid cron expression"),
        ({"cron": "* * *"}, "5 fields"),
        ({"every": "10s"}, "at least one minute"),
        ({"every": "often"}, "30m"),
        ({"at": "2020-01-01T00:00"}, "in the past"),
        ({"at": "tomorrow"}, "ISO 8601"),
        ({"cron": "* * * * *", "timezone": "Mars/Base"}, "unknown IANA timezone"),
        ({}, "exactly one"),
    ],
)
def test_invalid_jobs_are_refused_with_a_reason(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        job(**kwargs)


def test_job_names_cannot_be_paths() -> None:
    with pytest.raises(ValueError, match="job name"):
        make_job("../x", "p", every="1h", timezone="UTC", target="", now=NOW)


def test_parse_interval() -> None:
    assert parse_interval("2h") == timedelta(hours=2)
    assert parse_interval("1w") == timedelta(weeks=1)


def test_job_names_are_unique_and_removal_names_an_existing_job() -> None:
    first = make_job("coffee", "brew", every="1h", timezone="UTC", target="", now=NOW)
    other = make_job("tea", "steep", every="2h", timezone="UTC", target="", now=NOW)
    jobs = with_job(with_job([], first), other)
    assert [job.name for job in jobs] == ["coffee", "tea"]
    with pytest.raises(JobListError, match="a job named 'coffee' exists"):
        with_job(jobs, first)
    assert [job.name for job in without_job(jobs, "coffee")] == ["tea"]
    with pytest.raises(JobListError, match="no job named 'milk'"):
        without_job(jobs, "milk")
