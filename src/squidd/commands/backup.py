"""`squidd backup create [FILE] [--verify] [--include-secrets]`, `squidd backup verify FILE`,
`squidd backup restore FILE --target DIR`: one archive of the data dir and the workspace,
checked file by file, restored only into an empty folder (never over a live data dir).

Without FILE the archive goes to `backup.dir`, else `~/squidd-backups` (outside the data
dir it backs up; `<data dir>/backups` only for a service user whose home is the data dir).
The config file is copied beside it as `<archive>.config.toml`, its secret values blanked
unless `--include-secrets`; the output says what was left out.

Safe while the daemon runs (the files are copied under their locks, see `store/backup.py`).
Exit 0 on success, 1 when the archive cannot be written, is damaged or cannot be restored.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from squidd.commands import Commands, Start
from squidd.config import Settings
from squidd.errors import EXIT_FAILURE, EXIT_OK


def register(commands: Commands) -> None:
    backup = commands.add(
        "backup",
        help="back up the data dir, verify or restore a backup",
        example="squidd backup create --verify\nsquidd backup restore FILE --target ./restored",
    )
    actions = commands.actions(backup, "backup_action")
    create = actions.add(
        "create",
        help="write a backup archive",
        run=_create,
        start=Start.SETTINGS,
        example="squidd backup create --verify\nsquidd backup create ./b.tar.gz --include-secrets",
    )
    create.add_argument(
        "file",
        nargs="?",
        type=Path,
        help="default: backup.dir, else ~/squidd-backups, with a dated name",
    )
    create.add_argument("--verify", action="store_true", help="read it back and check it")
    create.add_argument(
        "--include-secrets",
        action="store_true",
        help="also the Matrix credentials, cross-signing keys and crypto store",
    )
    verify = actions.add(
        "verify",
        help="check an archive against its manifest",
        run=_verify,
        example="squidd backup verify ~/squidd-backups/squidd-2026-01-01.tar.gz",
    )
    verify.add_argument("file", type=Path)
    verify.set_defaults(start=Start.ARGS)
    restore = actions.add(
        "restore",
        help="restore an archive into an empty folder",
        run=_restore,
        example="squidd backup restore ./backup.tar.gz --target ./restored",
    )
    restore.add_argument("file", type=Path)
    restore.add_argument("--target", type=Path, required=True, help="a new or empty folder")
    restore.set_defaults(start=Start.ARGS)


def _create(args: argparse.Namespace, settings: Settings) -> int:
    from squidd.gateway.backups import backup_now, default_name
    from squidd.store.backup import BackupError, verify_backup

    target: Path = args.file or default_dir(settings) / default_name()
    try:
        manifest = backup_now(settings, target, secrets=args.include_secrets)
        print(f"backup: wrote {target}: {len(manifest.files)} files, {manifest.total_bytes} bytes")
        print(_copy_config(args.config, target, secrets=args.include_secrets))
        if not manifest.secrets:
            print(
                "backup: secrets left out (Matrix credentials, keys, crypto store); "
                "--include-secrets keeps them"
            )
        print("backup: left out: the history index (rebuilt), sockets, temporary files")
        if args.verify:
            verify_backup(target)
            print(f"backup: {target} verified")
    except BackupError as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def default_dir(settings: Settings) -> Path:
    """Where `backup create` writes without a file named: `backup.dir`, else
    `~/squidd-backups`, outside the data dir it backs up; a home inside the data dir (the
    service user's) gives `<data dir>/backups`, which no backup archives."""
    if settings.backup.dir is not None:
        return settings.backup.dir
    home = Path.home() / "squidd-backups"
    data_dir = settings.storage.data_dir.resolve()
    if home.resolve().is_relative_to(data_dir):
        return settings.backup_dir
    return home


_SECRET_LINE = re.compile(
    r"^(\s*)([A-Za-z0-9_-]*(pass(word)?|secret|token|api_key|credential)[A-Za-z0-9_-]*)\s*=.*$",
    re.IGNORECASE,
)


def _copy_config(explicit: Path | None, target: Path, *, secrets: bool) -> str:
    """The config file beside the archive (`<archive>.config.toml`, 0600); its secret values
    blanked unless `secrets`. What was done, in one line."""
    from squidd.config import find_config_file
    from squidd.fs import atomic_write_text

    source = find_config_file(explicit)
    if source is None:
        return "backup: no config file to copy (defaults and environment)"
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"backup: config {source} left out: cannot read it ({exc})"
    blanked = 0
    if not secrets:
        lines = []
        for line in text.splitlines():
            match = _SECRET_LINE.match(line)
            if match and not match.group(2).lower().endswith("_file"):
                line = f'{match.group(1)}{match.group(2)} = ""  # left out of the backup'
                blanked += 1
            lines.append(line)
        text = "\n".join(lines) + "\n"
    copy = target.with_name(f"{target.name}.config.toml")
    atomic_write_text(copy, text)
    left = f", {blanked} secret value(s) left out" if blanked else ""
    return f"backup: config {source} copied to {copy}{left}"


def _verify(args: argparse.Namespace) -> int:
    from squidd.store.backup import BackupError, verify_backup

    try:
        manifest = verify_backup(args.file)
    except BackupError as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(
        f"backup: {args.file} is whole: {len(manifest.files)} files, {manifest.total_bytes} "
        f"bytes, data format {manifest.data_format}, squidd {manifest.squidd}, "
        f"made {manifest.created_at}{', secrets inside' if manifest.secrets else ''}"
    )
    return EXIT_OK


def _restore(args: argparse.Namespace) -> int:
    from squidd.store.backup import BackupError, restore_backup
    from squidd.store.format import CURRENT

    try:
        manifest = restore_backup(args.file, args.target, max_format=CURRENT)
    except BackupError as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"backup: restored {len(manifest.files)} files into {args.target}")
    print(f"backup: point storage.data_dir at {args.target} (its workspace is inside it)")
    return EXIT_OK
