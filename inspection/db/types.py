"""Column types that store JSON as text, the way Ironic encodes dicts and lists."""

import json
from typing import Any

from sqlalchemy import Text
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class _JsonEncoded(TypeDecorator):
    """JSON text column; NULL reads as the empty container, like Ironic's JsonEncoded types."""

    impl = Text
    cache_ok = True
    empty: type = dict

    def __init__(self, mysql_as_long: bool = False) -> None:
        super().__init__()
        self.mysql_as_long = mysql_as_long

    def load_dialect_impl(self, dialect: Dialect) -> Any:
        if dialect.name == "mysql":
            return dialect.type_descriptor(
                mysql.LONGTEXT() if self.mysql_as_long else mysql.MEDIUMTEXT())
        return dialect.type_descriptor(Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if not isinstance(value, self.empty):
            raise TypeError(f"{type(self).__name__} needs a {self.empty.__name__}, "
                            f"got {type(value).__name__}")
        return json.dumps(value)

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        if value is None:
            return self.empty()
        return json.loads(value)


class JsonEncodedDict(_JsonEncoded):
    """A dict stored as JSON text."""

    cache_ok = True
    empty = dict


class JsonEncodedList(_JsonEncoded):
    """A list stored as JSON text."""

    cache_ok = True
    empty = list
