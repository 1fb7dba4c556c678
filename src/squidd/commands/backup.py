"""`squidd backup create [FILE] [--verify] [--include-secrets]`, `squidd backup verify FILE`,
`squidd backup restore FILE --target DIR`: one archive of the data dir and the workspace,
checked file by file, restored only into an empty folder (never over a live data dir).

Safe while the daemon runs (the files are copied under their locks, see `store/backup.py`).
Exit 0 on success, 1 when the archive cannot be written, is damaged or cannot be restored.
"""

from __future__ import annotations

import argparse
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
    create.add_argument("file", nargs="?", type=Path, help="default: [backup] dir, dated name")
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

    target: Path = args.file or settings.backup_dir / default_name()
    try:
        manifest = backup_now(settings, target, secrets=args.include_secrets)
        print(f"backup: wrote {target}: {len(manifest.files)} files, {manifest.total_bytes} bytes")
        if not manifest.secrets:
            print("backup: secrets left out (Matrix credentials, keys, crypto store)")
        if args.verify:
            verify_backup(target)
            print(f"backup: {target} verified")
    except BackupError as exc:
        print(f"backup: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


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
