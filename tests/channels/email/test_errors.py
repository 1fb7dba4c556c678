"""The email adapter's error tables: every exception class aioimaplib and aiosmtplib define
is in its table (a new library version that adds one fails here until someone decides what
it means), and an exception no server can cause is left alone (a defect, not a retry)."""

from __future__ import annotations

import ssl

import aioimaplib
import aiosmtplib
import pytest
from aioimaplib import aioimaplib as aioimaplib_module

from squidd.channels.email.errors import IMAP_TABLE, SMTP_TABLE, imap_error, smtp_error
from squidd.errors import DeliveryError, PermanentError, TransientError
from tests.support.libraries import exception_classes


def test_every_aioimaplib_exception_is_in_the_imap_table() -> None:
    classes = exception_classes(aioimaplib, aioimaplib_module)
    assert {cls.__name__ for cls in classes} >= {"Abort", "CommandTimeout", "AioImapException"}
    assert {cls.__name__ for cls in classes if cls not in IMAP_TABLE} == set()


def test_every_aiosmtplib_exception_is_in_the_smtp_table() -> None:
    classes = exception_classes(aiosmtplib, aiosmtplib.errors)
    assert len(classes) >= 15
    assert {cls.__name__ for cls in classes if cls not in SMTP_TABLE} == set()


def test_imap_sorts_by_what_a_retry_can_do() -> None:
    untrusted = ssl.SSLCertVerificationError("certificate verify failed")
    untrusted.verify_message = "self-signed certificate"
    assert isinstance(imap_error(untrusted, "connect"), PermanentError)
    for passing in (aioimaplib.Abort("gone"), ConnectionResetError(), TimeoutError()):
        error = imap_error(passing, "fetch")
        assert isinstance(error, TransientError) and not isinstance(error, PermanentError)
        assert str(error) == f"IMAP fetch failed: {type(passing).__name__}"


@pytest.mark.parametrize("defect", [KeyError("x"), ValueError("bad"), AttributeError("y")])
def test_what_no_server_causes_is_not_translated(defect: Exception) -> None:
    assert imap_error(defect, "fetch") is None
    assert smtp_error(defect) is None


def test_smtp_setup_problems_are_retried_and_say_so() -> None:
    error = smtp_error(aiosmtplib.SMTPAuthenticationError(535, "bad credentials"))
    assert isinstance(error, DeliveryError) and "rejected the login" in str(error)
    error = smtp_error(aiosmtplib.SMTPNotSupported("SMTPUTF8 is not supported"))
    assert isinstance(error, DeliveryError)
