"""`[speech]`: defaults, validation with key paths, the key from a file, and which of the
section, an agent and a room decides when an answer is spoken."""

from __future__ import annotations

from pathlib import Path

import pytest

from squidd.config import ConfigError, Settings, load_settings
from squidd.config.speech import SpeechSettings


def _load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_settings(path)


def test_defaults_speak_nothing_until_an_endpoint_is_named() -> None:
    speech = Settings().speech
    assert not speech.enabled
    assert (speech.model, speech.voice, speech.format) == ("tts-1", "alloy", "opus")
    assert (speech.reply, speech.long, speech.part_chars) == ("when-voice", "parts", 4096)


def test_a_full_section_loads_with_its_key_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "speech_key"
    key_file.write_text("sk-speech-secret-1\n")
    settings = _load(
        tmp_path,
        f"""
[speech]
base_url = "http://127.0.0.1:9/v1/"
api_key_file = "{key_file}"
voice = "nova"
reply = "always"
rooms = {{ "!quiet:example.org" = "never" }}
long = "summary"
part_chars = 1000
price_per_1m_chars = 15.0
""",
    )
    speech = settings.speech
    assert speech.base_url == "http://127.0.0.1:9/v1"
    assert speech.api_key is not None
    assert speech.api_key.get_secret_value() == "sk-speech-secret-1"
    assert "sk-speech-secret-1" not in repr(speech)
    assert speech.rooms == {"!quiet:example.org": "never"}
    assert (speech.long, speech.part_chars, speech.price_per_1m_chars) == ("summary", 1000, 15.0)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('reply = "sometimes"', "speech.reply"),
        ('format = "mp3"', "speech.format"),
        ('long = "cut"', "speech.long"),
        ("part_chars = 5000", "speech.part_chars"),
        ("part_chars = 10", "speech.part_chars"),
        ("max_parts = 0", "speech.max_parts"),
        ('base_url = "ftp://x"', "speech.base_url"),
        ('rooms = { "kitchen" = "always" }', "speech.rooms"),
        ('rooms = { "!a:b" = "loud" }', "speech.rooms"),
        ("price_per_1m_chars = -1", "speech.price_per_1m_chars"),
        ("timeout_s = 0", "speech.timeout_s"),
        ('voices = "x"', "speech.voices"),
    ],
)
def test_a_bad_value_is_reported_with_its_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, f"[speech]\n{text}\n")
    assert info.value.problems[0].split(":")[0].startswith(key)


def test_an_agent_may_set_its_own_voice_reply(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        '[[agents.list]]\nname = "main"\n[[agents.list]]\nname = "radio"\nvoice_reply = "always"\n',
    )
    assert [a.voice_reply for a in settings.agents.list] == [None, "always"]
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, '[[agents.list]]\nname = "main"\nvoice_reply = "loud"\n')
    assert "voice_reply" in info.value.problems[0]


def test_the_room_wins_over_the_agent_which_wins_over_the_section() -> None:
    speech = SpeechSettings(reply="never", rooms={"!r:x": "always"})
    assert speech.mode_for(agent=None, room=None) == "never"
    assert speech.mode_for(agent="when-voice", room=None) == "when-voice"
    assert speech.mode_for(agent="when-voice", room="!other:x") == "when-voice"
    assert speech.mode_for(agent="never", room="!r:x") == "always"
