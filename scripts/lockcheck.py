"""Whether the locks in requirements/ are in step with pyproject.toml (offline, no network).

pyproject.toml keeps ranges, for people who install squidd into an environment of their
own; requirements/run.txt (what deploy/install.sh installs) and requirements/test.txt (what
scripts/test installs: the same plus the test extra) pin the exact versions, with hashes,
that the suite passed with. `scripts/lock` regenerates them and stamps each with the digest
of the spec it was compiled from; this module computes that digest and checks:

- each lock carries the digest of the current spec (a dependency added, removed or changed
  in pyproject.toml or requirements/install.in without re-locking fails here);
- every line pins one exact version and carries hashes (pip's --require-hashes needs both);
- every direct requirement is pinned, at a version inside its range (hand edits fail here);
- the packages both locks hold are pinned alike (the tests test what is deployed).

    python scripts/lockcheck.py --check [--root DIR]    exit 1 and one line per problem
    python scripts/lockcheck.py --stamps [--root DIR]   only the first point
    python scripts/lockcheck.py --digest [--root DIR]   the spec digest (for scripts/lock)

Only the standard library is needed for --digest and --stamps (what the install scripts run
before installing); --check also needs `packaging`, or the copy inside pip, so any Python 3.11
with pip runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# What the locks are compiled for; the environment in which markers are evaluated.
TARGET_ENV = {
    "python_version": "3.11",
    "python_full_version": "3.11.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "os_name": "posix",
}
DIGEST_PREFIX = "# spec-sha256: "
INSTALL_IN = Path("requirements/install.in")
LOCKS = {
    # lock file -> the optional-dependency groups it holds beside the runtime dependencies
    Path("requirements/run.txt"): (),
    Path("requirements/test.txt"): ("test",),
}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _install_in(root: Path) -> list[str]:
    lines = (root / INSTALL_IN).read_text(encoding="utf-8").splitlines()
    reqs = (line.split("#", 1)[0].strip() for line in lines)
    return [r for r in reqs if r]


def spec(root: Path) -> dict[str, Any]:
    """What the locks are compiled from: the parts of pyproject.toml that choose packages."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    return {
        "requires-python": project.get("requires-python", ""),
        "dependencies": sorted(project.get("dependencies", [])),
        "optional-dependencies": {
            group: sorted(reqs)
            for group, reqs in sorted(project.get("optional-dependencies", {}).items())
        },
        "build-system.requires": sorted(pyproject.get("build-system", {}).get("requires", [])),
        "install.in": sorted(_install_in(root)),
    }


def spec_digest(root: Path) -> str:
    """sha256 of the spec, insensitive to order, comments and formatting of pyproject.toml."""
    canonical = json.dumps(spec(root), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _packaging() -> tuple[ModuleType, ModuleType, ModuleType]:
    """packaging's requirements, utils and version modules: imported only for --check, so
    that the install scripts' --stamps runs on a Python without it."""
    try:
        from packaging import requirements, utils, version
    except ImportError:  # a bare Python: pip carries a copy of packaging
        from pip._vendor.packaging import requirements, utils, version  # type: ignore[no-redef]
    return requirements, utils, version


def _stamp(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(DIGEST_PREFIX):
            return line[len(DIGEST_PREFIX) :].split()[0]
    return None


def check_stamps(root: Path) -> list[str]:
    """The locks that are missing or were compiled from another spec (standard library only)."""
    want = spec_digest(root)
    problems = []
    for lock in LOCKS:
        path = root / lock
        if not path.is_file():
            problems.append(f"{lock}: missing")
            continue
        stamped = _stamp(path.read_text(encoding="utf-8"))
        if stamped != want:
            problems.append(
                f"{lock}: compiled from another pyproject.toml or {INSTALL_IN} "
                f"(stamped {stamped}, now {want})"
            )
    return problems


@dataclass(frozen=True)
class Pin:
    version: str
    hashes: frozenset[str]


def parse_lock(text: str) -> tuple[dict[str, Pin], list[str]]:
    """The pins by normalised name, and the requirement lines that are not such a pin."""
    canonicalize_name = _packaging()[1].canonicalize_name
    pins: dict[str, Pin] = {}
    bad: list[str] = []
    # one requirement may span several lines joined by a trailing backslash
    logical: list[str] = []
    current = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        if current.strip():
            logical.append(current.strip())
        current = ""
    for entry in logical:
        match = _PIN.match(entry)
        hashes = frozenset(re.findall(r"--hash=(sha256:[0-9a-f]{64})", entry))
        if match is None or not hashes:
            bad.append(entry.split()[0])
            continue
        pins[canonicalize_name(match.group(1))] = Pin(match.group(2), hashes)
    return pins, bad


def check(root: Path) -> list[str]:
    """Every way the locks under root are out of step with its pyproject.toml; empty if none."""
    requirements, utils, version = _packaging()
    current = spec(root)
    problems = check_stamps(root)
    parsed: dict[Path, dict[str, Pin]] = {}
    for lock, groups in LOCKS.items():
        path = root / lock
        if not path.is_file():
            continue
        pins, bad = parse_lock(path.read_text(encoding="utf-8"))
        parsed[lock] = pins
        problems.extend(f"{lock}: {entry}: not an exact pin with hashes" for entry in bad)
        direct = [*current["dependencies"], *current["build-system.requires"]]
        direct += current["install.in"]
        for group in groups:
            direct += current["optional-dependencies"].get(group, [])
        for text in direct:
            req = requirements.Requirement(text)
            if req.marker is not None and not req.marker.evaluate(TARGET_ENV):
                continue
            pin = pins.get(utils.canonicalize_name(req.name))
            if pin is None:
                problems.append(f"{lock}: {req.name} (from {text!r}) is not pinned")
            elif not req.specifier.contains(version.Version(pin.version), prereleases=True):
                problems.append(f"{lock}: {req.name}=={pin.version} is outside {text!r}")
    if len(parsed) == len(LOCKS):
        run, test = (parsed[lock] for lock in LOCKS)
        for name, pin in sorted(run.items()):
            other = test.get(name)
            if other is None:
                problems.append(f"{name}: in run.txt but not in test.txt")
            elif other != pin:
                problems.append(
                    f"{name}: run.txt pins {pin.version}, test.txt {other.version} "
                    "(or their hashes differ)"
                )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="check the locks (offline)")
    mode.add_argument("--stamps", action="store_true", help="check only the stamped digests")
    mode.add_argument("--digest", action="store_true", help="print the spec digest")
    args = parser.parse_args(argv)
    if args.digest:
        print(spec_digest(args.root))
        return 0
    problems = check_stamps(args.root) if args.stamps else check(args.root)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("the locks are out of step with pyproject.toml: run scripts/lock", file=sys.stderr)
        return 1
    if args.check:
        print("locks in step with pyproject.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
