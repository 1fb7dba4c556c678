"""An agent's own Matrix account (`[agents.list.matrix]`) and mailbox (`[agents.list.email]`):
what each takes from `[matrix]` or `[email]`, where its files live, what a config may not
say, and that what arrives on it is that agent's (the routing rule), whatever the message's
room or sender."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.config import ConfigError, Settings, load_settings
from squidd.core.models import ChannelName, Destination, Inbound, SessionId, SourceId, channel_kind
from squidd.gateway.agents import AgentRoutes
from squidd.gateway.cron_targets import config_check
from squidd.tools.policy import ConfiguredToolPolicy

MATRIX = """
[matrix]
enabled = true
homeserver = "https://matrix.example.org"
user_id = "@home:example.org"
password = "pw-home"
allowed_users = ["@alice:example.org"]
device_name = "squidd"
rate_per_second = 0.5
"""


def _load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(f'{text}\n[storage]\ndata_dir = "{tmp_path / "data"}"\n', encoding="utf-8")
    return load_settings(path)


def _settings(tmp_path: Path, agents: str, matrix: str = MATRIX) -> Settings:
    return _load(tmp_path, matrix + agents)


AGENTS = """
[[agents.list]]
name = "home"
[[agents.list]]
name = "work"
rooms = ["!shared:example.org"]
[[agents.list]]
name = "planner"
[agents.list.matrix]
user_id = "@planner:example.org"
password_file = "{secret}"
"""


def test_an_agents_account_takes_the_rest_from_matrix(tmp_path: Path) -> None:
    secret = tmp_path / "planner-password"
    secret.write_text("pw-planner\n")
    settings = _settings(tmp_path, AGENTS.format(secret=secret))
    accounts = settings.matrix_accounts()
    assert [(a.channel, a.agent) for a in accounts] == [
        ("matrix", "home"),
        ("matrix-planner", "planner"),
    ]
    default, own = accounts
    assert default.settings is settings
    matrix = own.settings.matrix
    assert matrix.user_id == "@planner:example.org"
    assert matrix.password is not None and matrix.password.get_secret_value() == "pw-planner"
    assert matrix.homeserver == "https://matrix.example.org"
    assert matrix.allowed_users == ["@alice:example.org"]
    assert matrix.rate_per_second == 0.5
    assert matrix.device_name == "squidd (planner)"
    assert own.settings.storage.data_dir == tmp_path / "data" / "agents" / "planner"
    assert settings.matrix.user_id == "@home:example.org"  # the default account unchanged


def test_an_agents_account_runs_without_the_default_one(tmp_path: Path) -> None:
    matrix = MATRIX.replace("enabled = true", "enabled = false")
    text = '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
    text += '[agents.list.matrix]\nuser_id = "@work:example.org"\naccess_token = "tok"\n'
    settings = _settings(tmp_path, text, matrix)
    assert [a.channel for a in settings.matrix_accounts()] == ["matrix-work"]
    assert settings.channel_names() == ["matrix-work"]
    # A target with a typo of the agent's channel is refused naming the right one.
    with pytest.raises(ValueError, match=r"no 'matrix-wrok' channel \(matrix-work\)"):
        config_check(settings, "matrix-wrok:!room:example.org")


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        (
            '[[agents.list]]\nname = "home"\n[agents.list.matrix]\n'
            'user_id = "@x:example.org"\npassword = "p"\n',
            "the first agent's account is the [matrix] section",
        ),
        (
            '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
            '[agents.list.matrix]\nuser_id = "@home:example.org"\npassword = "p"\n',
            "is another account's too",
        ),
        (
            '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
            '[agents.list.matrix]\nuser_id = "@work:example.org"\n',
            "set password (or password_file) or access_token",
        ),
        (
            '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
            '[agents.list.matrix]\nuser_id = "work"\npassword = "p"\n',
            "must be a full Matrix user id",
        ),
    ],
)
def test_what_an_agents_account_may_not_say(tmp_path: Path, agents: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _settings(tmp_path, agents)
    assert said in str(caught.value)
    assert "pw-home" not in str(caught.value) and '"p"' not in str(caught.value)


def test_no_homeserver_anywhere_is_refused(tmp_path: Path) -> None:
    text = '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
    text += '[agents.list.matrix]\nuser_id = "@work:example.org"\npassword = "p"\n'
    with pytest.raises(ConfigError) as caught:
        _settings(tmp_path, text, "")
    assert "no homeserver" in str(caught.value)


def _inbound(channel: str, room: str, agent: str = "") -> Inbound:
    return Inbound(
        channel=ChannelName(channel),
        source_id=SourceId("$e"),
        session_id=SessionId(room),
        sender="@alice:example.org",
        text="hi",
        reply_to=Destination(ChannelName(channel), room),
        agent=agent,
    )


def test_what_arrives_on_an_agents_account_is_that_agents(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("pw-planner")
    settings = _settings(tmp_path, AGENTS.format(secret=secret))
    routes = AgentRoutes(settings)
    assert routes.agent_of(_inbound("matrix", "!any:example.org")) == "home"
    assert routes.agent_of(_inbound("matrix", "!shared:example.org")) == "work"
    # The planner's account, even in a room that work lists for the shared account.
    assert routes.agent_of(_inbound("matrix-planner", "!shared:example.org")) == "planner"
    assert routes.agent_of(_inbound("matrix-planner", "!dm:example.org")) == "planner"
    # A message naming its agent (a cron job's) still goes to it.
    assert routes.agent_of(_inbound("matrix-planner", "!dm:example.org", agent="home")) == "home"
    # Cron targets may name the agent's account; a channel nobody has is refused.
    found = config_check(settings, "matrix-planner:!dm:example.org")
    assert found == Destination(ChannelName("matrix-planner"), "!dm:example.org")
    with pytest.raises(ValueError, match="has no 'matrix-nobody' channel"):
        config_check(settings, "matrix-nobody:!dm:example.org")
    with pytest.raises(ValueError, match="a target of matrix-planner looks like"):
        config_check(settings, "matrix-planner:nothing")


def test_a_tool_rule_for_matrix_holds_on_an_agents_account_too() -> None:
    from squidd.config.tools import PolicyRule

    policy = ConfiguredToolPolicy([PolicyRule(channel="matrix", deny=["shell"])], [])
    assert channel_kind("matrix-planner") == "matrix" and channel_kind("email") == "email"
    assert not policy.allows("shell", "matrix-planner", SessionId("!r:example.org"))
    assert not policy.allows("shell", "matrix", SessionId("!r:example.org"))
    assert policy.allows("shell", "email", SessionId("bob@example.org"))


def test_a_backup_without_secrets_leaves_out_every_accounts_keys(tmp_path: Path) -> None:
    from squidd.gateway.backups import secret_files

    secret = tmp_path / "pw"
    secret.write_text("pw-planner")
    found = secret_files(_settings(tmp_path, AGENTS.format(secret=secret)))
    for root in ("", "agents/planner/"):
        for name in ("credentials.json", "store", "identity.json", "recovery-key.txt"):
            assert f"{root}matrix/{name}" in found


EMAIL = """
[email]
enabled = true
address = "bot@example.org"
password = "pw-bot"
imap_host = "imap.example.org"
smtp_host = "smtp.example.org"
smtp_port = 587
smtp_security = "starttls"
allowed_senders = ["alice@example.org"]
trusted_authserv_id = "mx.example.org"
"""
MAILBOX = """
[[agents.list]]
name = "home"
[[agents.list]]
name = "planner"
[agents.list.email]
address = "Planner@Example.org"
password_file = "{secret}"
"""


def test_an_agents_mailbox_takes_the_rest_from_email(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("pw-planner\n")
    settings = _load(tmp_path, EMAIL + MAILBOX.format(secret=secret))
    accounts = settings.mail_accounts()
    assert [(a.channel, a.agent) for a in accounts] == [
        ("email", "home"),
        ("email-planner", "planner"),
    ]
    email = accounts[1].settings.email
    assert (email.address, email.username, email.from_name) == (
        "planner@example.org",
        "planner@example.org",
        "planner",
    )
    login = email.smtp_login
    assert login is not None and login[0] == "planner@example.org"
    assert login[1].get_secret_value() == "pw-planner"
    assert (email.imap_host, email.smtp_port, email.smtp_security) == (
        "imap.example.org",
        587,
        "starttls",
    )
    assert email.allowed_senders == ["alice@example.org"]
    assert accounts[1].settings.storage.data_dir == tmp_path / "data" / "agents" / "planner"
    routes = AgentRoutes(settings)
    assert routes.agent_of(_inbound("email-planner", "alice@example.org")) == "planner"
    assert routes.agent_of(_inbound("email", "alice@example.org")) == "home"
    found = config_check(settings, "email-planner:alice@example.org")
    assert found == Destination(ChannelName("email-planner"), "alice@example.org")
    with pytest.raises(ValueError, match="a target of email-planner looks like"):
        config_check(settings, "email-planner:nobody")


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        (
            '[[agents.list]]\nname = "home"\n[agents.list.email]\n'
            'address = "x@example.org"\npassword = "p"\n',
            "the first agent's mailbox is the [email] section",
        ),
        (
            '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
            '[agents.list.email]\naddress = "BOT@example.org"\npassword = "p"\n',
            "is another mailbox's too",
        ),
        (
            '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
            '[agents.list.email]\naddress = "work@example.org"\n',
            "set password (or password_file)",
        ),
        (
            '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
            '[agents.list.email]\naddress = "work"\npassword = "p"\n',
            "must be a mail address",
        ),
    ],
)
def test_what_an_agents_mailbox_may_not_say(tmp_path: Path, agents: str, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, EMAIL + agents)
    assert said in str(caught.value)
    assert "pw-bot" not in str(caught.value) and '"p"' not in str(caught.value)


def test_config_check_and_an_empty_start_know_the_agents_own_accounts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from squidd.cli import main
    from squidd.commands.run import empty_start

    matrix = MATRIX.replace("enabled = true", "enabled = false")
    text = '[[agents.list]]\nname = "home"\n[[agents.list]]\nname = "work"\n'
    text += '[agents.list.matrix]\nuser_id = "@work:example.org"\naccess_token = "tok"\n'
    settings = _settings(tmp_path, text, matrix)
    config = tmp_path / "config.toml"
    assert empty_start(settings, config) is None  # the agent's account is a channel
    assert main(["--config", str(config), "config", "check"]) == 0
    out = capsys.readouterr().out
    assert "channels:  matrix-work" in out


def test_an_account_names_who_it_is(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("pw-planner\n")
    settings = _load(tmp_path, EMAIL + MAILBOX.format(secret=secret))
    assert [a.who for a in settings.mail_accounts()] == ["bot@example.org", "planner@example.org"]
