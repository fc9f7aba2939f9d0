"""Checking JSON against a schema: a model's final answer against the task's output schema, a
tool call's arguments against the tool's input_schema.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import jsonschema
from pydantic import BaseModel, ValidationError


@dataclasses.dataclass(frozen=True)
class ParseFailure:
    message: str


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def parse_json_answer(text: str) -> Any:
    """The answer as JSON (a Markdown code fence around it is tolerated)."""
    fenced = _FENCE.match(text)
    try:
        return json.loads(fenced.group(1) if fenced else text)
    except json.JSONDecodeError as err:
        return ParseFailure(f"The answer must be a JSON document matching the output schema; it is not valid JSON ({err.msg} at line {err.lineno} column {err.colno}).")


def check_schema(data: Any, schema: dict[str, Any], model: type[BaseModel] | None) -> Any:
    """``data`` validated: a model instance when the worker has the model, else the JSON itself."""
    if model is not None:
        try:
            return model.model_validate(data)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in err.errors()
            )
            return ParseFailure(f"The answer does not match the output schema: {problems}.")
    problem = argument_problem(schema, data)
    return data if problem is None else ParseFailure(f"The answer does not match the output schema: {problem}.")


def schema_validator(schema: dict[str, Any]) -> Any:
    return jsonschema.validators.validator_for(schema)(schema)


def argument_problem(schema: dict[str, Any], arguments: Any, validator: Any = None) -> str | None:
    """Why ``arguments`` fail ``schema``, or None. A broken schema is not the model's fault."""
    try:
        error = jsonschema.exceptions.best_match((validator or schema_validator(schema)).iter_errors(arguments))
    except jsonschema.exceptions.SchemaError:
        return None
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" (at {where})" if where else "")
