"""The channels' own files come back whole: the Matrix streamed message's record, the
verification flows in progress, the Matrix credentials and sync position, the identity's
keys, pins and trust requests, and an email folder's state (and a session's cursor).
Arbitrary valid records (tests/support/records.py) are written through the real file class
into a fresh folder, read back by a new instance, and compared as whole objects. (A channel
imports no store, so these keep their own small readers.)"""

from __future__ import annotations

from pathlib import Path

import anyio
from hypothesis import given
from hypothesis import strategies as st

from squidd.channels.email.state import FolderState, StateFile
from squidd.channels.matrix.identity.cross_signing import CrossSigningKeys
from squidd.channels.matrix.identity.local import IdentityFiles
from squidd.channels.matrix.ids import SyncToken
from squidd.channels.matrix.state import Credentials, MatrixFiles
from squidd.channels.matrix.stream import StreamRecord, StreamRecords
from squidd.channels.matrix.verification.kept import STATES, FlowFile, KeptFlow
from squidd.core.models import HistoryWindow, Message, SessionId
from squidd.store.jsonl import JsonlStore
from tests.support.records import EXAMPLES, folder, messages, texts

filled = texts.filter(bool)
moments = st.floats(min_value=0, max_value=2e10)


@EXAMPLES
@given(key=texts, record=st.builds(StreamRecord, room_id=texts, event_id=texts))
def test_the_streamed_message_record_comes_back_whole(key: str, record: StreamRecord) -> None:
    async def main(root: Path) -> StreamRecord | None:
        await StreamRecords(root).put(key, record)
        return await StreamRecords(root).get(key)

    with folder() as root:
        assert anyio.run(main, root) == record


kept_flows = st.builds(
    KeptFlow,
    id=filled,
    user_id=filled,
    device_id=filled,
    room_id=st.none() | filled,
    state=st.sampled_from(STATES),
    started_at=moments,
)


@EXAMPLES
@given(flows=st.lists(kept_flows, max_size=3))
def test_verification_flows_in_progress_come_back_whole(flows: list[KeptFlow]) -> None:
    async def main(path: Path) -> list[KeptFlow]:
        await FlowFile(path).save(flows)
        return await FlowFile(path).load()

    with folder() as root:
        assert anyio.run(main, root / "verifications.json") == flows


@EXAMPLES
@given(
    creds=st.builds(
        Credentials, homeserver=texts, user_id=texts, device_id=texts, access_token=texts
    ),
    token=filled,
)
def test_matrix_credentials_and_sync_position_come_back_whole(
    creds: Credentials, token: str
) -> None:
    async def main(data: Path) -> tuple[Credentials | None, SyncToken | None]:
        files = MatrixFiles(data)
        await files.prepare()
        await files.save_credentials(creds)
        await files.save_sync_token(creds.user_id, SyncToken(token))
        again = MatrixFiles(data)
        return await again.load_credentials(), await again.load_sync_token(creds.user_id)

    with folder() as data:
        assert anyio.run(main, data) == (creds, SyncToken(token))


uids = st.integers(min_value=1, max_value=2**32 - 1)

folder_states = st.builds(
    FolderState,
    uidvalidity=st.none() | uids,
    last_uid=st.none() | uids,
    pending=st.sets(uids, max_size=4),
    deferred=st.dictionaries(uids, texts, max_size=3),
    rate=st.dictionaries(texts, st.lists(moments, min_size=1, max_size=3), max_size=3),
)


@EXAMPLES
@given(state=folder_states)
def test_an_email_folders_state_comes_back_whole(state: FolderState) -> None:
    async def main(path: Path) -> FolderState:
        first = StateFile(path)
        first.state = state
        await first.save()
        return await StateFile(path).load()

    with folder() as root:
        assert anyio.run(main, root / "state.json") == state


@EXAMPLES
@given(
    user=texts,
    pins=st.dictionaries(texts, texts, max_size=3),
    requests=st.dictionaries(texts, st.none() | texts, max_size=3),
)
def test_matrix_identity_keys_pins_and_trust_requests_come_back_whole(
    user: str, pins: dict[str, str], requests: dict[str, str | None]
) -> None:
    keys = CrossSigningKeys.generate()

    async def main(data: Path) -> None:
        files = IdentityFiles(data)
        await files.save_keys(user, keys)
        await files.save_pins(pins)
        for who, master in requests.items():
            await files.request_trust(who, master)
        again = IdentityFiles(data)
        kept = await again.load_keys(user)
        assert kept is not None and kept.seeds() == keys.seeds()
        assert await again.load_pins() == pins
        assert dict(await again.take_requests()) == requests

    with folder() as data:
        anyio.run(main, data)


@EXAMPLES
@given(history=st.lists(messages, min_size=1, max_size=5), data=st.data())
def test_a_sessions_consolidation_cursor_comes_back_whole(
    history: list[Message], data: st.DataObject
) -> None:
    cursor = data.draw(st.integers(min_value=0, max_value=len(history)))

    async def main(root: Path) -> HistoryWindow:
        store = JsonlStore(root)
        await store.append_messages(SessionId("s"), history)
        await store.save_consolidated_cursor(SessionId("s"), cursor)
        return await JsonlStore(root).load_window(SessionId("s"))

    with folder() as root:
        assert anyio.run(main, root) == HistoryWindow(cursor, history[cursor:])
