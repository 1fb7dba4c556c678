"""What the third-party libraries an adapter wraps define, for the tests that hold each
adapter's error table to every exception class its libraries have."""

from __future__ import annotations

import inspect
from types import ModuleType


def exception_classes(*modules: ModuleType) -> set[type[BaseException]]:
    """The exception classes `modules` define (not the builtins they re-export)."""
    found: set[type[BaseException]] = set()
    for module in modules:
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ != "builtins":
                found.add(value)
    return found
