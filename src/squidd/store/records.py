"""Records serialised from their fields: one pydantic model per stored dataclass, made here.

The dataclasses the stores keep stay plain in `core/` (no pydantic there); a `Codec` derives
their on-disk form from the dataclass's own fields, so a field added to one is stored and
read back with no second list of fields to forget (a parked message once lost its
`command` that way). The JSON object has one key per field, named as the field; reading
ignores keys it does not know and gives a missing one the field's default, so what an
older squidd wrote still loads.

What a codec says explicitly:
* `not_stored`: fields never written, each with the reason (a hook is a callable: the code
  that hands the record on gives it again). Reading gives them their defaults.
* `fields`: a field's stored type where its JSON form is not pydantic's own for the type
  (a `Destination` is kept as its text `channel:target`, as it always was; a nested record
  as its own codec's form).
* `omit_defaults`: a field at its default is left out (a history line stays as short as
  it always was); reading gives it back.
* `keys`: a field stored under another key, where the files always named it so (the usage
  ledger's `prompt` for `prompt_tokens`).

A record that is not one (a wrong type, a missing required field) raises
`pydantic.ValidationError`, a `ValueError`, which the stores turn into a `StorageError`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    create_model,
)

from squidd.core.models import Destination, Inbound, Message, PendingReply, ToolCall

__all__ = [
    "INBOUND",
    "MESSAGE",
    "PENDING_REPLY",
    "TOOL_CALL",
    "Codec",
    "Moment",
    "StoredDestination",
    "Text",
]

T = TypeVar("T")


class _Stored(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Codec(Generic[T]):
    """The stored form of the dataclass `cls`, derived from its fields."""

    def __init__(
        self,
        cls: type[T],
        *,
        not_stored: Mapping[str, str] | None = None,
        fields: Mapping[str, Any] | None = None,
        keys: Mapping[str, str] | None = None,
        omit_defaults: bool = False,
    ) -> None:
        self.cls = cls
        self.omit_defaults = omit_defaults
        self.not_stored = dict(not_stored or {})
        overrides = dict(fields or {})
        aliases = dict(keys or {})
        hints = typing.get_type_hints(cls, include_extras=True)
        spec: dict[str, Any] = {}
        every = dataclasses.fields(cls)  # type: ignore[arg-type]
        for field in every:
            if field.name in self.not_stored:
                continue
            kind = overrides.pop(field.name, hints[field.name])
            alias = aliases.pop(field.name, None)
            if field.default is not dataclasses.MISSING:
                spec[field.name] = (kind, Field(field.default, alias=alias))
            elif field.default_factory is not dataclasses.MISSING:
                spec[field.name] = (kind, Field(default_factory=field.default_factory, alias=alias))
            else:
                spec[field.name] = (kind, Field(..., alias=alias))
        unknown = set(overrides) | set(aliases) | (set(self.not_stored) - {f.name for f in every})
        if unknown:
            raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")
        self.names = tuple(spec)
        self._spec = spec

    @functools.cached_property
    def _model(self) -> type[BaseModel]:
        """The pydantic model, built at the codec's first use rather than at import: most
        records are first read or written by a turn, not by the daemon's start."""
        model: type[BaseModel] = create_model(
            f"Stored{self.cls.__name__}", __base__=_Stored, **self._spec
        )
        return model

    def dump(self, record: T) -> dict[str, Any]:
        """The record as a JSON object (plain dicts, lists, text, numbers). A value JSON
        cannot hold, in a field typed `Any` (an inbound's `meta`, the channel's own), is
        kept as its text rather than failing the write that keeps the record."""
        values = {name: getattr(record, name) for name in self.names}
        return self._model.model_construct(**values).model_dump(
            mode="json", by_alias=True, exclude_defaults=self.omit_defaults, fallback=str
        )

    def load(self, data: object) -> T:
        """The record `dump` made (or an older squidd wrote); ValueError when it is not one."""
        stored = self._model.model_validate(data)
        return self.cls(**{name: getattr(stored, name) for name in self.names})

    def dumps(self, record: T, *, indent: int | None = None) -> str:
        separators = None if indent is not None else (",", ":")
        return json.dumps(
            self.dump(record), ensure_ascii=False, indent=indent, separators=separators
        )

    def loads(self, text: str | bytes) -> T:
        return self.load(json.loads(text))

    @property
    def stored(self) -> Any:
        """This record as a field of another record, in this codec's form."""
        return Annotated[
            self.cls,
            PlainValidator(
                lambda value: value if isinstance(value, self.cls) else self.load(value)
            ),
            PlainSerializer(self.dump),
        ]


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


Moment = Annotated[datetime, AfterValidator(_aware)]
"""A datetime; one stored without a zone (older files) is UTC."""

Text = Annotated[str, BeforeValidator(lambda value: "" if value is None else value)]
"""Text; null in older files is the empty text."""


def _destination(value: object) -> Destination | None:
    if value is None or isinstance(value, Destination):
        return value
    if not isinstance(value, str):
        raise ValueError("a destination is a text `channel:target`")  # noqa: TRY004 - pydantic reports ValueError
    return Destination.parse(value)


StoredDestination = Annotated[
    Destination | None,
    PlainValidator(_destination),
    PlainSerializer(lambda value: None if value is None else str(value)),
]
"""A `Destination` kept as its text, `channel:target` (None: none)."""

INBOUND: Codec[Inbound] = Codec(
    Inbound,
    not_stored={
        "ack": "a hook: the source is told by whoever hands the message on again",
        "on_undeliverable": "a hook, like `ack`",
        "record_id": "the router's record of one run: a message sent again gets its own",
    },
    fields={"reply_to": StoredDestination},
)
"""A message as a parked item keeps it, to run it again."""

MESSAGE: Codec[Message] = Codec(
    Message,
    not_stored={"images": "data: URLs of the current message, for the model only"},
    omit_defaults=True,
)
"""One history line (a field at its default left out, as history lines always were)."""

TOOL_CALL: Codec[ToolCall] = Codec(ToolCall)

PENDING_REPLY: Codec[PendingReply] = Codec(PendingReply)
"""A finished reply not yet delivered (the outbox; a parked item's reply)."""
