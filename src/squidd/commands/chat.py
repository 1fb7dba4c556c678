"""`squidd chat`: talk to the assistant in the terminal.

`squidd chat -m "..."` sends one message and prints the reply (for scripts and quick
questions); `squidd chat` opens an interactive prompt that streams replies as they arrive.
Both go through the same AgentLoop as the daemon, with the per-call memory tools and the
tools of the configured MCP servers (connected here, waiting at most
`mcp.connect_timeout_s` before the first turn), on the same data dir (appends are locked,
so the daemon may run at the same time). The daily caps of `[limits]` hold here as on every
channel: a turn whose scope (the whole day, this terminal session) used its cap gets
`limits.refusal_text` without a model call; `--ignore-caps` lifts them for one run.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, TextIO

import anyio
import structlog

from squidd.commands import Commands
from squidd.config import Settings
from squidd.core.models import (
    ChannelName,
    Inbound,
    LLMEvent,
    SessionId,
    SourceId,
    StreamRestart,
    TextDelta,
)
from squidd.core.ports import Tool
from squidd.errors import EXIT_CONFIG, LLMError, SquiddError, StorageError

if TYPE_CHECKING:  # loaded by the handler: the runtime brings the LLM client
    from squidd.gateway.terminal import Terminal
    from squidd.gateway.terminal_approval import TerminalAsker

log = structlog.get_logger()

CHANNEL = "terminal"
_PROMPT = "you> "
_EXIT_WORDS = frozenset({"/exit", "/quit", ":q"})
_CAP_HINT = (
    "a daily cap in [limits] is reached (`squidd usage` shows where it went); "
    "`squidd chat --ignore-caps` lifts the caps for one run"
)


def register(commands: Commands) -> None:
    chat = commands.add(
        "chat",
        help="talk to the assistant in the terminal",
        run=_run,
        example='squidd chat\nsquidd chat -m "what is on my calendar?"\nsquidd chat --agent work',
    )
    chat.add_argument("-m", "--message", help="send one message, print the reply, exit")
    chat.add_argument("--session", default="terminal", help="session name (default: terminal)")
    chat.add_argument(
        "--ignore-caps",
        action="store_true",
        help="lift the daily caps ([limits]) for this run only",
    )
    chat.add_argument(
        "--agent", default=None, help="talk to this agent ([[agents.list]]; default: the first)"
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from squidd import __version__
    from squidd.store.format import claim_new, refuse_newer

    try:
        refuse_newer(settings.storage.data_dir, squidd=__version__)
        claim_new(settings.storage.data_dir, squidd=__version__)  # marked before it is written
    except SquiddError as exc:  # a newer format, or a marker that cannot be read
        print(f"config: storage.data_dir: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except OSError as exc:
        print(f"config: storage.data_dir: cannot create it: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_CONFIG
    agent = getattr(args, "agent", None)
    if agent is not None and agent not in settings.agent_names:
        known = ", ".join(settings.agent_names)
        print(f"squidd: no agent named {agent!r} (agents: {known})", file=sys.stderr)
        return EXIT_CONFIG
    return chat_command(
        settings,
        message=args.message,
        session=args.session,
        ignore_caps=args.ignore_caps,
        agent=agent,
    )


def _tools(terminal: Terminal, session: SessionId) -> list[Tool]:
    """The per-call tools of the daemon's turns (memory, cron, spawn) bound to this session,
    and the tools of the MCP servers connected right now, decided where every turn's are.

    Cron jobs made here have no delivery target by default (the terminal is not listening
    when they fire): their replies stay in the job's history unless a target is given.
    Sub-agents run here only with wait=true (background ones need the daemon's router).
    """
    from squidd.gateway.turn_tools import TurnScope

    return terminal.tools.for_turn(TurnScope(session, CHANNEL))


def session_for(name: str) -> SessionId:
    return SessionId(f"terminal:{name}")


def _preflight(settings: Settings) -> str | None:
    """A problem that makes any LLM call pointless, said in one line; None when fine."""
    llm = settings.llm
    if not llm.providers and llm.api_key is None and llm.base_url.startswith("https://api.openai."):
        return (
            "llm.api_key is not set: put it in the config ([llm] api_key or api_key_file) "
            "or in SQUIDD_LLM__API_KEY"
        )
    return None


async def _refusal(terminal: Terminal, session: SessionId, text: str) -> str | None:
    """The daily caps' fixed reply when this turn's scope (the whole day, this terminal
    session) used its cap today, as the daemon's channels get it; None to go ahead."""
    if terminal.caps is None:
        return None
    turn = Inbound(ChannelName(CHANNEL), SourceId(""), session, "owner", text)
    refusal = await terminal.caps.refusal(turn)
    if refusal is not None:
        print(f"squidd: {_CAP_HINT}", file=sys.stderr)
    return refusal


async def _command(terminal: Terminal, conversation: SessionId, text: str) -> str | None:
    """The answer when `text` is a chat command (`/new`, `/model`, ...); None otherwise."""
    from squidd.gateway.chat_commands import ChatCommands

    message = Inbound(ChannelName(CHANNEL), SourceId(""), conversation, "owner", text)
    return await ChatCommands(terminal).answer(message)


async def _one_message(
    terminal: Terminal, conversation: SessionId, text: str, out: TextIO, asker: TerminalAsker
) -> None:
    reply = await _command(terminal, conversation, text)
    if reply is None:
        reply = await _refusal(terminal, conversation, text)
    if reply is None:
        session = await terminal.conversations.session(conversation)
        reply = await terminal.runtime.agent.run(
            session,
            text,
            CHANNEL,
            llm=await terminal.conversations.llm(conversation),
            extra_tools=_tools(terminal, session),
        )
    # A call refused for want of a terminal is said in the reply, whatever the model wrote.
    notes = "".join(f"\n[{note}]" for note in asker.refused)
    out.write(reply + notes + "\n")
    out.flush()


async def _interactive(terminal: Terminal, conversation: SessionId, out: TextIO) -> None:
    async def show(event: LLMEvent) -> None:
        if isinstance(event, TextDelta):
            out.write(event.text)
            out.flush()
        elif isinstance(event, StreamRestart):
            out.write("\n[connection lost; the answer starts over]\n")
            out.flush()

    out.write("squidd chat — /exit or Ctrl-D to leave\n")
    while True:
        try:
            line = await anyio.to_thread.run_sync(input, _PROMPT)
        except EOFError:
            out.write("\n")
            return
        text = line.strip()
        if not text:
            continue
        if text in _EXIT_WORDS:
            return
        out.write("squidd> ")
        fixed = await _command(terminal, conversation, text)
        if fixed is None:
            fixed = await _refusal(terminal, conversation, text)
        if fixed is not None:
            out.write(f"{fixed}\n")
            out.flush()
            continue
        session = await terminal.conversations.session(conversation)
        try:
            await terminal.runtime.agent.run(
                session,
                text,
                CHANNEL,
                llm=await terminal.conversations.llm(conversation),
                extra_tools=_tools(terminal, session),
                on_event=show,
            )
        except LLMError as exc:
            out.write(f"\n[no answer: {exc}]\n")
        out.write("\n")
        out.flush()


async def _chat(
    settings: Settings,
    message: str | None,
    session_name: str,
    errlog: TextIO,
    ignore_caps: bool,
    agent: str | None,
) -> int:
    from squidd.gateway.build import build_terminal
    from squidd.gateway.mcp import connected_mcp
    from squidd.gateway.terminal_approval import TerminalAsker

    session = session_for(session_name)
    asker = TerminalAsker(is_tty=sys.stdin.isatty(), out=sys.stdout)
    async with connected_mcp(settings, errlog=errlog) as mcp:
        terminal = build_terminal(settings, mcp, ignore_caps=ignore_caps, asker=asker, agent=agent)
        try:
            await terminal.runtime.learn_windows()
            if message is not None:
                await _one_message(terminal, session, message, sys.stdout, asker)
            else:
                await _interactive(terminal, session, sys.stdout)
        finally:
            await terminal.runtime.aclose()
    return 0


def chat_command(
    settings: Settings,
    *,
    message: str | None,
    session: str,
    ignore_caps: bool = False,
    agent: str | None = None,
) -> int:
    problem = _preflight(settings)
    if problem is not None:
        print(f"squidd: {problem}", file=sys.stderr)
        return 1
    # The MCP servers' own stderr chatter would interleave with the conversation.
    with open(os.devnull, "w") as quiet:
        try:
            return anyio.run(_chat, settings, message, session, quiet, ignore_caps, agent)
        except LLMError as exc:
            print(f"squidd: {exc} ({settings.llm.base_url})", file=sys.stderr)
            return 1
        except StorageError as exc:
            print(f"squidd: {exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130
