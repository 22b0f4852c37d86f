"""The table the protocol code walks: each structure of `app.sqs.shapes` as members with a kind.

Derived once, at import, from the dataclasses' annotations, so that the shapes are written once
and their types serve both mypy and the wire. A member is one of the scalar kinds SQS's model
uses (string, integer, long, boolean, blob), a list, a map with string keys, or a structure.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass

from app.sqs.shapes import LONG, Shape, Wire


class Kind(enum.Enum):
    STRING = "string"
    INTEGER = "integer"
    LONG = "long"
    BOOLEAN = "boolean"
    BLOB = "blob"
    LIST = "list"
    MAP = "map"
    STRUCTURE = "structure"


_SCALARS = {str: Kind.STRING, int: Kind.INTEGER, bool: Kind.BOOLEAN, bytes: Kind.BLOB}


@dataclass(frozen=True, slots=True)
class Type:
    """A member's type: `item` is a list's item or a map's value; `struct` a structure's spec."""

    kind: Kind
    item: Type | None = None
    struct: Struct | None = None


@dataclass(frozen=True, slots=True)
class Member:
    name: str  # the member's name in SQS's model, in JSON and as the attribute
    wire: str  # its name in the query protocol and in XML
    type: Type
    required: bool
    key: str = "Name"  # a map entry's key element
    value: str = "Value"  # a map entry's value element


@dataclass(frozen=True, slots=True)
class Struct:
    cls: type[Shape]
    members: tuple[Member, ...]

    @property
    def name(self) -> str:
        return self.cls.__name__


def _type(annotation: object) -> tuple[Type, Wire | None, bool]:
    """The type of an annotation, its `Wire` names if any, and whether it admits None."""
    wire: Wire | None = None
    long = False
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *extras = typing.get_args(annotation)
        wire = next((extra for extra in extras if isinstance(extra, Wire)), None)
        long = any(extra is LONG for extra in extras)
    optional = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        optional = len(args) < len(typing.get_args(annotation))
        (annotation,) = args
        if typing.get_origin(annotation) is typing.Annotated:
            inner, inner_wire, _ = _type(annotation)
            return inner, wire or inner_wire, True
    origin = typing.get_origin(annotation)
    if origin is list:
        (item,) = typing.get_args(annotation)
        return Type(Kind.LIST, item=_type(item)[0]), wire, optional
    if origin is dict:
        key, value = typing.get_args(annotation)
        if key is not str:
            raise TypeError(f"map keys are strings in SQS, not {key}")
        return Type(Kind.MAP, item=_type(value)[0]), wire, optional
    if isinstance(annotation, type) and issubclass(annotation, Shape):
        return Type(Kind.STRUCTURE, struct=struct_of(annotation)), wire, optional
    if isinstance(annotation, type) and annotation in _SCALARS:
        return Type(Kind.LONG if long else _SCALARS[annotation]), wire, optional
    raise TypeError(f"no SQS kind for {annotation!r}")


_STRUCTS: dict[type[Shape], Struct] = {}


def struct_of(cls: type[Shape]) -> Struct:
    """The spec of a shape's dataclass, with the members in the order they are declared."""
    found = _STRUCTS.get(cls)
    if found is None:
        found = _STRUCTS[cls] = _derive(cls)
    return found


def _derive(cls: type[Shape]) -> Struct:
    hints = typing.get_type_hints(cls, include_extras=True)
    members = []
    for field in dataclasses.fields(cls):
        member_type, wire, optional = _type(hints[field.name])
        required = not optional and field.default is dataclasses.MISSING
        members.append(
            Member(
                name=field.name,
                wire=wire.name if wire else field.name,
                type=member_type,
                required=required,
                key=wire.key if wire else "Name",
                value=wire.value if wire else "Value",
            )
        )
    return Struct(cls, tuple(members))
