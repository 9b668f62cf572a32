"""Reading a Hugging Face ``config.json``: loading the file, and typed access to its fields
with one-line errors that name the file and the field (``/x/config.json:
num_hidden_layers must be a positive integer, got "32"``).

A vision-language wrapper keeps its language model under ``text_config``; the fields are
read from there first (and named ``text_config.<field>`` in errors and sources), falling
back to the top level, so that a plain config and a wrapped one read the same way.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterable

from .errors import ModelInputError

CONFIG_NAME = "config.json"


def _shown(value: Any) -> str:
    """A value as the file spells it (JSON), so "32" and 32 read differently in an error."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_model_config(path: str | Path) -> tuple[dict[str, object], Path]:
    """The config dict and the file it came from: ``path`` is the file, or a model folder
    holding ``config.json``. One-line ModelInputError naming the path when it is missing,
    unreadable, not JSON, or not a JSON object."""
    file = Path(path)
    if file.is_dir():
        file = file / CONFIG_NAME
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelInputError(f"{file}: no such model config file") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = " ".join(str(exc).split())
        raise ModelInputError(f"{file}: cannot read the model config ({reason})") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelInputError(f"{file}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(config, dict):
        raise ModelInputError(f"{file}: the model config must be a JSON object, got {type(config).__name__}")
    return config, file


class Fields:
    """Typed, located access to a config's fields. ``where`` names the file in errors;
    ``names`` maps each key to how errors and sources spell it (``text_config.hidden_size``)."""

    def __init__(self, values: Mapping[str, object], where: str, names: dict[str, str] | None = None) -> None:
        self.values = values
        self.where = where
        self.names = names if names is not None else {k: k for k in values}

    @classmethod
    def of_config(cls, config: Mapping[str, object], where: str) -> Fields:
        """The language model's fields: ``text_config`` over the top level when there is one."""
        text = config.get("text_config")
        if text is None:
            return cls(config, where)
        if not isinstance(text, dict):
            raise ModelInputError(f"{where}: text_config must be an object, got {_shown(text)}")
        values = {k: v for k, v in config.items() if k != "text_config"}
        names = {k: k for k in values}
        values.update(text)
        names.update({k: f"text_config.{k}" for k in text})
        return cls(values, where, names)

    def name(self, key: str) -> str:
        return self.names.get(key, key)

    def fail(self, key: str, message: str) -> ModelInputError:
        return ModelInputError(f"{self.where}: {self.name(key)} {message}")

    def has(self, key: str) -> bool:
        return self.values.get(key) is not None

    def first(self, keys: Iterable[str]) -> str | None:
        """The first of ``keys`` present with a non-null value (aliases across families)."""
        return next((k for k in keys if self.has(k)), None)

    def get(self, key: str, default: Any = None) -> Any:
        value = self.values.get(key)
        return default if value is None else value

    def int(self, key: str, *, minimum: int = 1, default: int | None = None) -> int:
        """An integer ≥ ``minimum``; required unless ``default`` is given."""
        value = self.values.get(key)
        if value is None:
            if default is not None:
                return default
            raise self.fail(key, "is missing")
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer ≥ {minimum}"
            raise self.fail(key, f"must be {kind}, got {_shown(value)}")
        return value

    def one_of(self, keys: tuple[str, ...], *, minimum: builtins.int = 1) -> tuple[builtins.int, str]:
        """The first present alias of ``keys`` as an integer, and the key it came from."""
        key = self.first(keys)
        if key is None:
            raise ModelInputError(f"{self.where}: {' / '.join(self.name(k) for k in keys)} is missing")
        return self.int(key, minimum=minimum), key

    def flag(self, key: str, default: bool) -> bool:
        value = self.values.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {_shown(value)}")
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self.values.get(key)
        if value is None and default is not None:
            return default
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"must be a non-empty string, got {_shown(value)}")
        return value

    def int_list(self, key: str, *, minimum: builtins.int = 0) -> list[builtins.int]:
        value = self.values.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) or v < minimum
                                              for v in value):
            raise self.fail(key, f"must be a list of integers ≥ {minimum}, got {_shown(value)}")
        return value

    def str_list(self, key: str) -> list[str]:
        value = self.values.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"must be a list of strings, got {_shown(value)}")
        return value

    def sub(self, key: str) -> Fields:
        """A nested object (``quantization_config``, ``linear_attn_config``) as Fields whose
        names carry the parent's (``quantization_config.quant_method``)."""
        value = self.values.get(key)
        if not isinstance(value, dict):
            raise self.fail(key, f"must be an object, got {_shown(value)}")
        prefix = self.name(key)
        return Fields(value, self.where, {k: f"{prefix}.{k}" for k in value})
