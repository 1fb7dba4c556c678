"""Skills: `SKILL.md` folders found in the workspace, indexed in the prompt, read on demand.

A skill is a folder `<root>/<folder>/SKILL.md` (roots: `<workspace>/skills` and the
configured extra dirs) whose YAML front matter names it (`name`, `description`, optional
`always: true` and `requires: {bins: [...], env: [...]}`) above a markdown body; other files
may sit beside it. Only the names and descriptions go into the system prompt, sorted and
bounded so the prompt's bytes stay the same from turn to turn (provider prompt caching);
the body comes through the `read_skill(name)` tool, except for `always` skills, which are
inlined. A skill whose binaries or environment variables are missing is listed as
unavailable, not hidden. Bad front matter skips the skill with a warning naming the file;
a SKILL.md or folder that is a symlink leading out of its root is refused. The catalog is
re-read only when a root, a skill folder or a SKILL.md changed (modification time).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio.to_thread
import structlog
from pydantic import Field, StringConstraints

from squidd.core.journal import Effect
from squidd.core.models import ToolResult
from squidd.errors import ToolError
from squidd.text import clean_text
from squidd.tools.arguments import Arguments
from squidd.tools.declared import Declared

log = structlog.get_logger()

SKILL_FILE = "SKILL.md"
_MAX_SKILL_BYTES = 256_000
_MAX_DESCRIPTION = 300


class SkillFormatError(ValueError):
    """A SKILL.md whose front matter is missing or wrong; the message says what."""


@dataclass(frozen=True, slots=True)
class Skill:
    name: str
    description: str
    path: Path
    body: str
    always: bool = False
    missing: tuple[str, ...] = ()
    """What it needs and this machine lacks (`bin:jq`, `env:GITHUB_TOKEN`); empty: usable."""

    @property
    def available(self) -> bool:
        return not self.missing


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _split_front_matter(text: str) -> tuple[str, str] | None:
    if not text.startswith("---"):
        return None
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "---":
        return None
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() == "---":
            return "".join(lines[1:number]), "".join(lines[number + 1 :])
    return None


def _strings(value: Any, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SkillFormatError(f"'{field}' must be a list of names")
    return list(value)


def parse_skill(path: Path, text: str) -> Skill:
    """A skill from its SKILL.md text; SkillFormatError says what is wrong with the front matter."""
    parts = _split_front_matter(text)
    if parts is None:
        raise SkillFormatError("no YAML front matter between '---' lines")
    import yaml  # only a workspace with skills needs it (docs/performance.md)

    try:
        data = yaml.safe_load(parts[0])
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"front matter is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SkillFormatError("front matter must be a mapping")
    name, description = data.get("name"), data.get("description")
    if not isinstance(name, str) or not name.strip() or len(name) > 64 or "\n" in name:
        raise SkillFormatError("'name' must be a short one-line string")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("'description' must be a non-empty string")
    always = data.get("always", False)
    if not isinstance(always, bool):
        raise SkillFormatError("'always' must be true or false")
    requires = data.get("requires") or {}
    if not isinstance(requires, dict):
        raise SkillFormatError("'requires' must be a mapping with 'bins' and/or 'env'")
    missing = [
        f"bin:{b}" for b in _strings(requires.get("bins"), "requires.bins") if not shutil.which(b)
    ]
    missing += [
        f"env:{e}" for e in _strings(requires.get("env"), "requires.env") if not os.environ.get(e)
    ]
    description = " ".join(description.split())[:_MAX_DESCRIPTION]
    return Skill(name.strip(), description, path, parts[1].strip(), always, tuple(missing))


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_ino)


class SkillCatalog:
    """The skills under the roots, cached until one of their files changes."""

    def __init__(
        self,
        roots: Sequence[Path],
        *,
        max_index_chars: int = 4000,
        max_body_chars: int = 20_000,
    ) -> None:
        self._roots = tuple(roots)
        self._max_index = max_index_chars
        self._max_body = max_body_chars
        self._cache: tuple[tuple[object, ...], tuple[Skill, ...]] | None = None

    def _stamps(self) -> tuple[object, ...]:
        stamps: list[object] = []
        for root in self._roots:
            stamps.append(_stamp(root))
            try:
                entries = sorted(root.iterdir())
            except OSError:
                continue
            for entry in entries:
                stamps.append((entry.name, _stamp(entry), _stamp(entry / SKILL_FILE)))
        return tuple(stamps)

    def skills(self) -> tuple[Skill, ...]:
        """Every loadable skill, sorted by name (blocking: call from a worker thread)."""
        stamps = self._stamps()
        if self._cache is not None and self._cache[0] == stamps:
            return self._cache[1]
        found: dict[str, Skill] = {}
        for root in self._roots:
            for skill in self._load_root(root):
                if skill.name in found:
                    log.warning("skill_duplicate", name=skill.name, file=str(skill.path))
                    continue
                found[skill.name] = skill
        skills = tuple(sorted(found.values(), key=lambda s: s.name))
        self._cache = (stamps, skills)
        log.info(
            "skills_loaded", count=len(skills), unavailable=sum(not s.available for s in skills)
        )
        return skills

    def _load_root(self, root: Path) -> list[Skill]:
        try:
            real_root = root.resolve(strict=True)
            folders = sorted(p for p in root.iterdir() if p.is_dir())
        except OSError:
            return []
        loaded = []
        for folder in folders:
            path = folder / SKILL_FILE
            if not path.exists():
                continue
            real = path.resolve()
            if not _inside(real, real_root):
                log.warning(
                    "skill_refused", file=str(path), reason="symlink leads out of its folder"
                )
                continue
            if not real.is_file() or real.stat().st_size > _MAX_SKILL_BYTES:
                log.warning("skill_refused", file=str(path), reason="not a file or too large")
                continue
            try:
                text = real.read_text(encoding="utf-8", errors="replace")
                loaded.append(parse_skill(path, text))
            except SkillFormatError as exc:
                log.warning("skill_skipped", file=str(path), reason=str(exc))
            except OSError as exc:
                log.warning("skill_skipped", file=str(path), reason=exc.strerror or str(exc))
        return loaded

    def index_text(self) -> str:
        """The prompt section: names and descriptions, `always` bodies inlined; bounded."""
        skills = self.skills()
        if not skills:
            return ""
        lines = ["## Skills", "Read a skill with read_skill(name) before following it."]
        used = sum(len(line) + 1 for line in lines)
        for skill in skills:
            state = "" if skill.available else f" (unavailable: needs {', '.join(skill.missing)})"
            line = f"- {skill.name}: {skill.description}{state}"
            if used + len(line) + 1 > self._max_index:
                lines.append(f"- … {len(skills)} skills in all; more with read_skill")
                break
            lines.append(line)
            used += len(line) + 1
        for skill in skills:
            if skill.always and skill.available:
                lines += ["", f"### Skill: {skill.name}", skill.body[: self._max_body]]
        return "\n".join(lines)

    def read(self, name: str) -> str:
        for skill in self.skills():
            if skill.name == name:
                body = skill.body
                if len(body) > self._max_body:
                    body = body[: self._max_body] + "\n[skill truncated]"
                # File names from the file system: valid text, one line each.
                beside = sorted(
                    " ".join(clean_text(p.name).split())
                    for p in skill.path.parent.iterdir()
                    if p.name != SKILL_FILE
                )
                note = (
                    ""
                    if skill.available
                    else f"\n\nUnavailable here: needs {', '.join(skill.missing)}."
                )
                files = (
                    f"\n\nFiles beside it (read with read_file): {', '.join(beside)}"
                    if beside
                    else ""
                )
                return f"# Skill: {skill.name}\n\n{body}{note}{files}"
        names = ", ".join(s.name for s in self.skills()) or "none"
        raise ToolError(f"no skill named {name!r}; skills: {names}")


class ReadSkillArguments(Arguments):
    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)] = Field(
        description="The skill's name."
    )


class ReadSkillTool(Declared[ReadSkillArguments], name="read_skill", effect=Effect.READ_ONLY):
    description = "Read the instructions of one of the skills listed in the system prompt."

    def __init__(self, catalog: SkillCatalog) -> None:
        self._catalog = catalog

    async def execute(self, arguments: Mapping[str, Any]) -> ToolResult:
        name = self.parse(arguments).name
        text = await anyio.to_thread.run_sync(self._catalog.read, name)
        return ToolResult(text)
