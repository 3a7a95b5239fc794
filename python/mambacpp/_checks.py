# SPDX-License-Identifier: MIT
"""Argument checks of the llama-cpp-python-shaped interface (mambacpp.Llama): a wrong type is a
TypeError naming the argument, as Python's own functions raise it, before anything reaches the
engine (whose errors about values are mambacpp.Error, a ValueError)."""

from __future__ import annotations

import numbers
import os
from typing import Any, List, Optional, Sequence, Union


def type_name(value: Any) -> str:
    """The name of a value's type, as error messages show it."""
    return type(value).__name__


def check_int(name: str, value: Any, allow_none: bool = False) -> Optional[int]:
    """An int (bools and floats refused: `max_tokens=True` or `n_ctx=512.0` are mistakes)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        expected = "an int or None" if allow_none else "an int"
        raise TypeError(f"{name} must be {expected}, got {type_name(value)}")
    return int(value)


def check_number(name: str, value: Any, allow_none: bool = False) -> Optional[float]:
    """A real number (an int or a float; not a bool, not a string)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        expected = "a number or None" if allow_none else "a number"
        raise TypeError(f"{name} must be {expected}, got {type_name(value)}")
    return float(value)


def check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {type_name(value)}")
    return value


def check_str(name: str, value: Any, allow_none: bool = False) -> Optional[str]:
    if value is None and allow_none:
        return None
    if not isinstance(value, str):
        expected = "a str or None" if allow_none else "a str"
        raise TypeError(f"{name} must be {expected}, got {type_name(value)}")
    return value


def check_path(name: str, value: Any) -> str:
    """A filesystem path: a str or an os.PathLike (pathlib.Path)."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    raise TypeError(f"{name} must be a str or os.PathLike path, got {type_name(value)}")


def check_stop(value: Any) -> Optional[List[str]]:
    """None, a string or a list of strings (llama-cpp-python's default is an empty list)."""
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return list(value) or None
    raise TypeError(f"stop must be a str or a list of str, got {type_name(value)}")


def check_prompt(value: Any) -> Union[str, List[int]]:
    """A completion prompt: text (str, or UTF-8 bytes) or a sequence of int token ids."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if isinstance(value, Sequence) or hasattr(value, "__array__"):
        ids = list(value)
        if all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in ids):
            return [int(i) for i in ids]
    raise TypeError(f"prompt must be a str or a list of int token ids, got {type_name(value)}")


def check_messages(value: Any) -> List[dict]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(m, dict) for m in value):
        raise TypeError(f"messages must be a list of message dicts ({{'role', 'content'}}), got "
                        f"{type_name(value)}")
    return list(value)


def check_text_bytes(name: str, value: Any) -> str:
    """Text given as bytes (llama-cpp-python's tokenize takes UTF-8 bytes) or as str."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    raise TypeError(f"{name} must be bytes (UTF-8) or a str, got {type_name(value)}")


def check_ids(name: str, value: Any) -> List[int]:
    if isinstance(value, (str, bytes)) or not (isinstance(value, Sequence) or hasattr(value, "__array__")):
        raise TypeError(f"{name} must be a list of int token ids, got {type_name(value)}")
    ids = list(value)
    if not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in ids):
        raise TypeError(f"{name} must be a list of int token ids")
    return [int(i) for i in ids]
