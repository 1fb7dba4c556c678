"""Configuration: defaults, validation with key paths, env overrides, secrets from files
and systemd credentials, the documented example file."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from squidd.config import ConfigError, Settings, load_settings
from squidd.config.sections import AgentSettings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "config.example.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def squidd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "squidd", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_consolidation_defaults() -> None:
    settings = Settings()
    assert settings.agents.consolidation_threshold == 100
    assert settings.agents.keep_recent_ratio == 0.2
    assert not hasattr(settings.agents, "keep_recent")
    assert not hasattr(settings.agents, "consolidation_pool")


def test_keep_recent_ratio_must_be_between_0_and_1_exclusive() -> None:
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ValidationError):
            AgentSettings(consolidation_threshold=100, keep_recent_ratio=bad)


def test_keep_recent_ratio_valid() -> None:
    assert (
        AgentSettings(consolidation_threshold=100, keep_recent_ratio=0.3).keep_recent_ratio == 0.3
    )


def test_consolidation_threshold_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, "[agents]\nconsolidation_threshold = 0\n"))
    assert info.value.problems[0].startswith("agents.consolidation_threshold:")


def test_every_problem_is_reported_with_its_key_path(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        '[agents]\nkeep_recent_ratio = 1.5\n[llm]\nbase_url = "ftp://x"\nmodle = "typo"\n'
        '[heartbeat]\ntimezone = "Mars/Olympus"\nactive_hours = "8 to 10"\n',
    )
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    keys = sorted(p.split(":")[0] for p in info.value.problems)
    assert keys == [
        "agents.keep_recent_ratio",
        "heartbeat.active_hours",
        "heartbeat.timezone",
        "llm.base_url",
        "llm.modle",
    ]


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    config = write(tmp_path, "[llm\nmodel = 'x'\n")
    with pytest.raises(ConfigError, match="TOML syntax"):
        load_settings(config)


def test_env_overrides_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write(tmp_path, '[llm]\nmodel = "from-file"\nmax_retries = 1\n')
    monkeypatch.setenv("SQUIDD_LLM__MODEL", "from-env")
    settings = load_settings(config)
    assert settings.llm.model == "from-env"
    assert settings.llm.max_retries == 1


def test_env_nested_lists_sections_and_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three levels deep, a list as JSON, a whole section as JSON with a key of its own
    laid over it, the name in any case: each over the file's value, the rest of the
    file's table kept."""
    config = write(
        tmp_path,
        '[llm]\nmodel = "file"\nmax_retries = 1\nfallback_models = ["f"]\n'
        '[tools.shell]\nenabled = false\n[limits]\nrefusal_text = "file"\n',
    )
    monkeypatch.setenv("SQUIDD_TOOLS__SHELL__ENABLED", "true")
    monkeypatch.setenv("SQUIDD_LLM__FALLBACK_MODELS", '["a", "b"]')
    monkeypatch.setenv("squidd_limits", '{"refusal_text": "json", "daily_tokens": 5}')
    monkeypatch.setenv("SQUIDD_LIMITS__REFUSAL_TEXT", "nested")
    monkeypatch.setenv("SQUIDD_TIMEZONE", "Europe/Berlin")
    settings = load_settings(config)
    for name in list(os.environ):
        if name.upper().startswith("SQUIDD_"):
            monkeypatch.delenv(name)
    expected = load_settings(  # the same settings written out, with no environment
        write(
            tmp_path,
            'timezone = "Europe/Berlin"\n[llm]\nmodel = "file"\nmax_retries = 1\n'
            'fallback_models = ["a", "b"]\n[tools.shell]\nenabled = true\n'
            '[limits]\nrefusal_text = "nested"\ndaily_tokens = 5\n',
        )
    )
    assert settings == expected


def test_top_level_keys_of_the_file_in_any_case_as_before(tmp_path: Path) -> None:
    """The file's top-level keys were matched in any case (the settings read them so until
    the environment's reader moved): `[LLM]` still loads; two spellings of one key are one
    problem, not a silent pick. Keys inside a section are exact, as they always were."""
    settings = load_settings(write(tmp_path, 'Timezone = "Asia/Tokyo"\n[LLM]\nmodel = "x"\n'))
    assert (settings.timezone, settings.llm.model) == ("Asia/Tokyo", "x")
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, '[llm]\nmodel = "x"\n[LLM]\nmodel = "y"\n'))
    assert caught.value.problems == ["LLM: the same key as llm (case does not matter here)"]
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, '[llm]\nModel = "x"\n'))
    assert caught.value.problems == [
        "llm.Model: unknown key (check the spelling against config.example.toml)"
    ]


def test_env_problems_name_the_key_not_the_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write(tmp_path, '[llm]\nmodel = "file"\n')
    monkeypatch.setenv("SQUIDD_LLM__MAX_RETRIES", "many-secret-7")
    monkeypatch.setenv("SQUIDD_LLM__NO_SUCH_KEY", "x")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert caught.value.problems == [
        "llm.max_retries: Input should be a valid integer, unable to parse string as an integer",
        "llm.no_such_key: unknown key (check the spelling against config.example.toml)",
    ]
    monkeypatch.delenv("SQUIDD_LLM__MAX_RETRIES")
    monkeypatch.delenv("SQUIDD_LLM__NO_SUCH_KEY")
    monkeypatch.setenv("SQUIDD_LLM__FALLBACK_MODELS", "[secret-not-json")
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    assert caught.value.problems == [
        "environment: a SQUIDD_LLM... value is not valid JSON (lists and tables are given as JSON)"
    ]


def test_env_library_loaded_only_for_an_env_key(tmp_path: Path) -> None:
    """The environment's reader (pydantic-settings) is imported only when a `SQUIDD_*`
    variable names a key: `SQUIDD_CONFIG` names the file, not a key."""
    config = write(tmp_path, '[llm]\nmodel = "file"\n')
    probe = (
        "import sys; from pathlib import Path; from squidd.config import load_settings; "
        f"s = load_settings(Path({str(config)!r})); "
        "print(s.llm.model, 'pydantic_settings' in sys.modules)"
    )
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("SQUIDD_")}
    runs = {
        "none": {},
        "config": {"SQUIDD_CONFIG": str(config)},
        "key": {"SQUIDD_LLM__MODEL": "env"},
    }
    seen = {
        name: subprocess.run(
            [sys.executable, "-c", probe],
            env={**clean, **extra},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for name, extra in runs.items()
    }
    assert seen == {
        "none": ["file", "False"],
        "config": ["file", "False"],
        "key": ["env", "True"],
    }


def test_config_path_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUIDD_CONFIG", str(write(tmp_path, '[llm]\nmodel = "via-env-path"\n')))
    assert load_settings().llm.model == "via-env-path"


def test_secret_from_file_never_shown(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file-123456\n")
    settings = load_settings(write(tmp_path, f'[llm]\napi_key_file = "{key_file}"\n'))
    assert settings.llm.api_key is not None
    assert settings.llm.api_key.get_secret_value() == "sk-from-file-123456"
    assert "sk-from-file" not in repr(settings)


def test_secret_from_systemd_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "llm_api_key").write_text("sk-credential-abcdef")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    settings = load_settings(write(tmp_path, ""))
    assert settings.llm.api_key is not None
    assert settings.llm.api_key.get_secret_value() == "sk-credential-abcdef"


def test_secret_inline_and_file_conflict(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("x-secret-1")
    with pytest.raises(ConfigError) as info:
        load_settings(
            write(tmp_path, f'[llm]\napi_key = "sk-inline-999"\napi_key_file = "{key_file}"\n')
        )
    assert "sk-inline-999" not in str(info.value)
    assert info.value.problems[0].startswith("llm:")


def test_missing_secret_file_is_a_clear_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read secret file"):
        load_settings(write(tmp_path, f'[llm]\napi_key_file = "{tmp_path}/nope"\n'))


def test_invalid_value_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(write(tmp_path, "[llm]\napi_key = 12345678901\n"))
    assert "12345678901" not in str(info.value)


def _keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys.extend(_keys(annotation, f"{prefix}{name}."))
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_example_documents_every_key() -> None:
    """Every settings key appears in config.example.toml (set, or commented out) with a comment."""
    text = EXAMPLE.read_text()
    tomllib.loads(text)
    section = ""
    present: set[str] = set()
    for raw in text.splitlines():
        line = raw.strip().lstrip("#").strip()
        if line.startswith("[") and line.endswith("]") and " " not in line:
            section = line.strip("[]")
        elif "=" in line:
            key = line.split("=", 1)[0].strip()
            present.add(f"{section}.{key}" if section else key)
    missing = [k for k in _keys(Settings) if k not in present]
    assert missing == []


def test_cost_and_limit_keys_are_checked_with_their_key_paths(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        "[agents]\ncontext_budget = 1.5\nmax_repeated_tool_calls = 0\n"
        '[llm.prices]\n"m" = { input = -1, output = 2 }\n'
        '[limits]\ntimezone = "Mars/Olympus"\nnotify_target = "nowhere"\ndaily_tokens = 0\n'
        "[tools]\nmax_result_chars = 10\n",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(config)
    keys = sorted(p.split(":")[0] for p in info.value.problems)
    assert keys == [
        "agents.context_budget",
        "agents.max_repeated_tool_calls",
        "limits.daily_tokens",
        "limits.notify_target",
        "limits.timezone",
        "llm.prices.m.input",
        "tools.max_result_chars",
    ]


def test_prices_and_limits_load(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        '[llm.prices]\n"gpt-4o-mini" = { input = 0.15, output = 0.6, cached_input = 0.075 }\n'
        '[limits]\ndaily_cost = 2.5\ntimezone = "Europe/Berlin"\n'
        "[agents]\ncontext_budget = 16000\n",
    )
    settings = load_settings(config)
    assert settings.llm.prices["gpt-4o-mini"].cached_input == 0.075
    assert settings.limits.daily_cost == 2.5
    assert settings.agents.context_budget == 16000


def test_a_broken_env_value_stops_run_with_one_line_not_a_traceback(tmp_path: Path) -> None:
    """As an operator meets it: `Environment=SQUIDD_LLM__FALLBACK_MODELS=[x` in the unit,
    `squidd run` and `config check` exit 2 (systemd does not restart on it) naming the
    variable's section, the value not echoed."""
    config = write(tmp_path, '[llm]\nmodel = "file"\n')
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("SQUIDD_")}
    env["SQUIDD_LLM__FALLBACK_MODELS"] = "[secret-not-json"
    line = "config: environment: a SQUIDD_LLM... value is not valid JSON"
    for command in (["run"], ["config", "check"]):
        result = squidd("--config", str(config), *command, env=env)
        assert (result.returncode, result.stdout) == (2, ""), result
        assert result.stderr.startswith(line), result.stderr
        assert "Traceback" not in result.stderr
        assert "secret" not in result.stderr
