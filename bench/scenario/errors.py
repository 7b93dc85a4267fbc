"""Scenario errors: one ``<file>: <dotted.path>: <reason>`` line per problem.

Validators raise :func:`field_error` (a pydantic error whose path is the validator's location plus
``where``); :func:`errors_of` turns a pydantic ``ValidationError`` into ``(path, reason)`` pairs in
the project's words, and :func:`raise_errors` into a :class:`ScenarioError`.
"""
from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError


class ScenarioError(ValueError):
    """Invalid scenario. ``errors`` holds ``(dotted_path, reason)`` pairs; the message has one
    ``<file>: <path>: <reason>`` line per error."""

    def __init__(self, message: str, errors: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(message)
        self.errors = list(errors)


def field_error(where: str, reason: str) -> PydanticCustomError:
    """A validation error whose path is ``<validator location>.<where>``."""
    return PydanticCustomError("scenario", "{where}: {reason}", {"where": where, "reason": reason})


def _model_at(root: type[BaseModel], loc: Sequence[Any]) -> type[BaseModel] | None:
    """The model class a validation error location points into (for 'allowed fields' hints)."""

    def inner_model(tp: Any) -> type[BaseModel] | None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            return tp
        for arg in typing.get_args(tp):
            found = inner_model(arg)
            if found is not None:
                return found
        return None

    cls: type[BaseModel] | None = root
    for part in loc:
        if cls is None:
            return None
        if isinstance(part, int):
            continue  # list index: same item model
        field = cls.model_fields.get(part)
        if field is None:
            return None
        cls = inner_model(field.annotation)
    return cls


def _reason(e: dict[str, Any], root: type[BaseModel]) -> str:
    typ, ctx, msg = e["type"], e.get("ctx") or {}, e["msg"]
    if typ == "missing":
        return "required"
    if typ == "extra_forbidden":
        model = _model_at(root, e["loc"][:-1])
        if model is not None:
            return f"unknown field (allowed: {', '.join(model.model_fields)})"
        return "unknown field"
    ops = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}
    if typ in ops:
        bound = next(iter(ctx.values()))
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        return f"must be {ops[typ]} {bound} (got {e['input']!r})"
    if typ == "value_error":
        return str(ctx.get("error", msg.removeprefix("Value error, ")))
    if typ == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    reason = msg.replace("Input should be", "must be")
    inp = e.get("input")
    if isinstance(inp, (str, int, float, bool)) or inp is None:
        reason += f" (got {inp!r})"
    return reason


def errors_of(exc: ValidationError, root: type[BaseModel]) -> list[tuple[str, str]]:
    """``(dotted path, reason)`` of each error of validating ``root`` (the scenario model)."""
    out = []
    for e in exc.errors(include_url=False):
        loc = [str(p) for p in e["loc"]]
        if e["type"] == "scenario":
            ctx = e["ctx"]
            loc += [ctx["where"]]
            reason = ctx["reason"]
        else:
            reason = _reason(e, root)
        out.append((".".join(loc) or "<top>", reason))
    return out


def raise_errors(source: str, errors: list[tuple[str, str]], prefix: str = "") -> typing.NoReturn:
    lines = [f"{source}: {prefix}{path}: {reason}" for path, reason in errors]
    raise ScenarioError("\n".join(lines), errors)
