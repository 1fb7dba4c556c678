"""`squidd init`: write a config and a workspace with the prompt files; never overwrite."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from squidd.commands import Commands, Start
from squidd.errors import ConfigError
from squidd.fs import FILE_MODE, make_private_dir
from squidd.workspace import CONFIG_TEMPLATE, WORKSPACE_FILES, template_text

if TYPE_CHECKING:
    from squidd.config import Settings

EXAMPLE_SKILL = Path("skills/example/SKILL.md")


def default_config_path() -> Path:
    from_env = os.environ.get("SQUIDD_CONFIG")
    if from_env:
        return Path(from_env).expanduser()
    return Path.home() / ".config" / "squidd" / "config.toml"


def _create(path: Path, text: str, mode: int) -> bool:
    """Write a new file; False (and nothing touched) when the path exists in any form."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return True


def _make_dir(path: Path, created: list[Path]) -> None:
    missing = [p for p in (path, *path.parents) if not p.exists()]
    make_private_dir(path)
    created.extend(reversed([p for p in missing if p.is_dir()]))


def init_command(
    config_path: Path | None, *, next_steps: bool = True, config_written: bool = False
) -> int:
    """Write a config and a workspace; never overwrite. Exit 0, or 2 on a bad config.
    `config_written`: the caller wrote the config (and said so); only what is new here is
    listed."""
    from squidd import __version__
    from squidd.config import load_settings
    from squidd.store.format import claim_new

    target = (config_path or default_config_path()).expanduser()
    created: list[Path] = []
    kept: list[Path] = []
    try:
        _make_dir(target.parent, created)
        if _create(target, template_text(CONFIG_TEMPLATE), FILE_MODE):
            created.append(target)
        elif not config_written:
            kept.append(target)
    except OSError as exc:
        print(f"init: cannot write {target}: {exc.strerror}", file=sys.stderr)
        return 1

    try:
        settings = load_settings(target)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"config: {problem}", file=sys.stderr)
        print(f"init: fix {target}, then run `squidd init` again", file=sys.stderr)
        return 2

    workspace = settings.workspace_dir
    try:
        if claim_new(settings.storage.data_dir, squidd=__version__):
            created.append(settings.storage.data_dir)
        _make_dir(workspace, created)
        for name in WORKSPACE_FILES:
            path = workspace / name
            (created if _create(path, template_text(name), FILE_MODE) else kept).append(path)
        # One example skill; only when the skills folder is new, so a removed example stays gone.
        skills = workspace / "skills"
        if not skills.exists():
            _make_dir(skills / EXAMPLE_SKILL.parent.name, created)
            path = skills / EXAMPLE_SKILL.parent.name / EXAMPLE_SKILL.name
            _create(path, template_text(str(EXAMPLE_SKILL)), FILE_MODE)
            created.append(path)
        keys = _api_key(settings, created, kept)
    except OSError as exc:
        print(f"init: cannot write in {workspace}: {exc.strerror}", file=sys.stderr)
        return 1

    for path in created:
        print(f"created  {path}{'/' if path.is_dir() else ''}")
    if config_written:
        return 0
    if kept:
        print(f"kept {len(kept)} existing file(s) unchanged: {', '.join(p.name for p in kept)}")
    if not created:
        print("nothing to do: the config and the workspace already exist")
    if not next_steps:
        return 0
    flag = "" if config_path is None else f" --config {target}"
    print(
        "\nNext steps:\n"
        f"  1. Edit {target}: the LLM endpoint, model and API key (llm.api_key_file),\n"
        "     then the channels you want (matrix, email).\n"
        f"  2. Tell the assistant about you in {workspace / 'USER.md'}\n"
        f"     and shape its character in {workspace / 'SOUL.md'}.\n"
        f"  3. squidd{flag} config check\n"
        f"  4. squidd{flag} chat\n"
        f"  5. For the OpenAI-compatible API, set [api] enabled = true; its key is in {keys}:\n"
        f'     curl -H "Authorization: Bearer $(grep -v ^# {keys} | head -1)" '
        f"http://{settings.api.listen}/v1/models"
    )
    return 0


def _api_key(settings: Settings, created: list[Path], kept: list[Path]) -> Path:
    """A random API key in the keys file (0600), unless that file exists."""
    from squidd.config.api import new_key

    path = settings.api.keys_path(settings.storage.data_dir)
    _make_dir(path.parent, created)
    text = f"# squidd API keys: one per line (Authorization: Bearer <key>)\n{new_key()}\n"
    (created if _create(path, text, 0o600) else kept).append(path)
    return path


def register(commands: Commands) -> None:
    # Before any settings: the config to load is what this command writes.
    init = commands.add(
        "init",
        help="write a config and a workspace with prompt files",
        run=_run,
        start=Start.ARGS,
        example="squidd init --interactive\nsquidd init --config ./config.toml",
    )
    init.add_argument(
        "--interactive",
        action="store_true",
        help="ask for the LLM, Matrix and email settings, try them, then write (no secrets in "
        "the config: they go to credential files beside it)",
    )


def _run(args: argparse.Namespace) -> int:
    if args.interactive:
        from squidd.commands.init_interactive import interactive_init

        default = default_config_path()
        return interactive_init((args.config or default).expanduser(), init_command, default)
    return init_command(args.config)
