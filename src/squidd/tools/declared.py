"""A built-in tool declared once: its name, its effect and its argument model in the class
statement, its description beside them.

    class CronRemoveTool(Declared[CronRemoveArguments], name="cron_remove",
                         effect=Effect.IDEMPOTENT):
        description = "Remove a scheduled job by its name."

The argument model (tools/arguments.py) gives the JSON schema the model sees
(`parameters`) and the checks of what it sends (`self.parse(arguments)`, typed as the
model); the effect says what a second run does, for a turn resumed after a crash
(core/journal.py). A class without a name is a shared base (the file tools'), not a tool.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar, cast, get_args

from squidd.core.journal import Effect
from squidd.tools.arguments import Arguments, parse, schema_of

__all__ = ["Declared"]

A = TypeVar("A", bound=Arguments)


class Declared(Generic[A]):
    """Base of the built-in tools (see the module)."""

    name: ClassVar[str] = ""
    effect: ClassVar[Effect] = Effect.SIDE_EFFECT
    arguments: ClassVar[type[Arguments]] = Arguments
    parameters: ClassVar[Mapping[str, Any]] = schema_of(Arguments)

    def __init_subclass__(
        cls, *, name: str = "", effect: Effect | None = None, **kwargs: Any
    ) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            found = [a for a in get_args(base) if isinstance(a, type) and issubclass(a, Arguments)]
            if found:
                cls.arguments = found[0]
                cls.parameters = schema_of(found[0])
        if name:
            if effect is None:
                raise TypeError(f"the tool {name!r} declares no effect")
            cls.name, cls.effect = name, effect

    def parse(self, arguments: Mapping[str, Any]) -> A:
        """The model's arguments as this tool's model; a `ToolError` naming what is wrong."""
        return cast(A, parse(self.arguments, arguments))
