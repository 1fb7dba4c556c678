"""The Matrix adapter's error table: every exception class matrix-nio and aiohttp define is
in it (a new library version that adds one fails here until someone decides what it means);
a homeserver out of reach is transient, nio's refusals make a reply wait, and what no
homeserver can cause (a store file that cannot be written, a bug) is never called "homeserver
unreachable": it leaves unchanged."""

from __future__ import annotations

from types import ModuleType

import aiohttp
import nio
import nio.exceptions
import pytest

from squidd.channels.matrix.client import call
from squidd.channels.matrix.errors import TABLE, Fault, call_error, fault_of, send_error
from squidd.errors import DeliveryError, PermanentError, TransientError
from tests.support.libraries import exception_classes

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "library", [(nio, nio.exceptions), (aiohttp,)], ids=["matrix-nio", "aiohttp"]
)
def test_every_exception_the_library_defines_is_in_the_table(
    library: tuple[ModuleType, ...],
) -> None:
    classes = exception_classes(*library)
    assert len(classes) >= 10
    assert {cls.__qualname__ for cls in classes if cls not in TABLE} == set()


async def _raise(exc: BaseException) -> None:
    raise exc


async def test_a_homeserver_out_of_reach_is_transient() -> None:
    for exc in (
        ConnectionRefusedError(111, "refused"),
        TimeoutError(),
        aiohttp.ServerDisconnectedError(),
    ):
        with pytest.raises(TransientError, match="syncing: homeserver unreachable") as info:
            await call("syncing", _raise(exc))
        assert not isinstance(info.value, PermanentError)


async def test_a_bad_address_is_permanent() -> None:
    with pytest.raises(PermanentError, match="no usable URL"):
        await call("logging in", _raise(aiohttp.InvalidURL("nope://")))


@pytest.mark.parametrize(
    "exc",
    [
        PermissionError(13, "Permission denied", "/data/matrix/store.db"),
        OSError(28, "No space left on device"),
        KeyError("a bug"),
        nio.LocalProtocolError("No such pending key share request found"),
    ],
)
async def test_no_network_trouble_leaves_call_unchanged(exc: Exception) -> None:
    with pytest.raises(type(exc)) as info:
        await call("syncing", _raise(exc))
    assert info.value is exc


def test_a_reply_waits_for_nio_refusals_and_the_network() -> None:
    refused = send_error("!r:x", nio.GroupEncryptionError("not shared"))
    assert isinstance(refused, DeliveryError) and "cannot send to !r:x" in str(refused)
    assert isinstance(send_error("!r:x", aiohttp.ClientOSError()), DeliveryError)


@pytest.mark.parametrize(
    "exc",
    [nio.TransferCancelledError(), OSError(28, "No space left on device"), ValueError("bug")],
)
def test_a_defect_in_a_reply_is_left_to_the_router(exc: Exception) -> None:
    assert fault_of(exc) is Fault.DEFECT
    assert send_error("!r:x", exc) is None
    assert call_error("sending", exc) is None
