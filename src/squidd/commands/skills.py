"""`squidd skills list`: the skills the assistant sees, whether each is usable, and why not.

Reads the same folders the daemon does (`<workspace>/skills` and `tools.skills.extra_dirs`)
through the same catalog, so what it prints is what the model is offered. Skipped or refused
folders appear as warnings in the log (`skill_skipped`, `skill_refused`) on stderr.
"""

from __future__ import annotations

import argparse

from squidd.commands import Commands
from squidd.config import Settings


def register(commands: Commands) -> None:
    skills = commands.add(
        "skills", help="the skills the assistant can use", example="squidd skills list"
    )
    actions = commands.actions(skills, "skills_command")
    actions.add(
        "list",
        help="list skills, whether each is usable, and skipped files",
        run=_run,
        example="squidd skills list",
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    return skills_command(settings)


def skills_command(settings: Settings) -> int:
    from squidd.gateway.runtime import build_skills  # the runtime loads the LLM client

    catalog = build_skills(settings)
    if catalog is None:
        print("skills are off ([tools.skills] enabled = false)")
        return 0
    skills = catalog.skills()
    if not skills:
        print(f"no skills found (looked in {settings.workspace_dir / 'skills'})")
        return 0
    for skill in skills:
        state = "usable" if skill.available else f"unavailable: needs {', '.join(skill.missing)}"
        always = ", always in the prompt" if skill.always else ""
        print(f"{skill.name}  [{state}{always}]")
        print(f"    {skill.description}")
        print(f"    {skill.path}")
    return 0
