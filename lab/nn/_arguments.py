"""Type checks for lab.nn's functions, read from their annotations: what the C binding's signature
tables are for lab.lab, the annotations are for the Python faces. `@checked` reads a function's type
hints once, when the module is imported, and refuses a wrong type before the body runs - with a
TypeError naming the function, the argument and what it expected, as torch's own functions do - so
a list or None where a tensor belongs never surfaces as an AttributeError from deep inside, and a
function added later is checked by the same rule the day it carries annotations.

Only types are checked here, and cheaply (isinstance, or the presence of __index__ / __float__); an
int or a real number that is not already a Python int or float (a bool, a NumPy scalar, anything
with __index__ or __float__) is converted here, once, so the body never runs a caller's conversion
in the middle of its arithmetic. Values - ranges, shapes, dtypes - are checked where they are used
(torch's functions on the fallback path, lab's binding on the GPU), and symbolic sizes under
torch.compile pass as they are."""
import collections.abc
import functools
import inspect
import operator
import typing
from typing import Optional

import torch


def _is_index(value) -> bool:
    return type(value) is int or hasattr(type(value), "__index__") or isinstance(value, torch.SymInt)


def _is_real(value) -> bool:
    return type(value) is float or type(value) is int or isinstance(value, (torch.SymFloat, torch.SymInt)) or \
        (hasattr(type(value), "__float__") and not isinstance(value, (complex, str, bytes, torch.Tensor)))


def _is_sequence_of_index(value) -> bool:
    if type(value) is not tuple and type(value) is not list and (
            not isinstance(value, collections.abc.Sequence) or isinstance(value, (str, bytes))):
        return False
    for item in value:
        if type(item) is not int and not _is_index(item):
            return False
    return True


# A check is a tuple: accepts(value) -> bool, what it expected (for the message), and convert(value)
# -> the Python int, float or tuple of ints the body gets (None where the value passes as it is).
# Called on every call of every face, so the common case - the value already of the plain type -
# returns at the first test.


def _as_int(value):
    return value if type(value) is int or isinstance(value, torch.SymInt) else operator.index(value)


def _as_float(value):
    return value if type(value) in (float, int) or isinstance(value, (torch.SymFloat, torch.SymInt)) else float(value)


def _as_ints(value):
    if type(value) is tuple:
        for item in value:
            if type(item) is not int:
                break
        else:
            return value  # a tuple of ints already: the common case, returned as it is
    return tuple(_as_int(item) for item in value)


def _union(checks, accepts_none):
    """One check for Union[...] of checks (each member's conversion applied by the first that accepts)."""
    expected = " or ".join([check[1] for check in checks] + (["None"] if accepts_none else []))
    if len(checks) == 1:  # Optional[X]: the common case, kept to one extra test
        member_accepts, _, member_convert = checks[0]
        accepts = (lambda value: value is None or member_accepts(value)) if accepts_none else member_accepts
        convert = None if member_convert is None else (lambda value: value if value is None else member_convert(value))
        return accepts, expected, convert

    members = tuple(checks)

    def accepts(value):
        if value is None:
            return accepts_none
        for check in members:
            if check[0](value):
                return True
        return False

    def convert(value):
        if value is None:
            return value
        for check in members:
            if check[0](value):
                return value if check[2] is None else check[2](value)
        return value
    return accepts, expected, (convert if any(check[2] is not None for check in checks) else None)


def _check_for(hint) -> Optional[tuple]:
    """The check a type hint stands for; None where it asks for nothing checkable (Any, bool, no hint)."""
    origin, parts = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        checks = [_check_for(part) for part in parts if part is not type(None)]
        return None if any(check is None for check in checks) else _union(checks, type(None) in parts)
    if origin in (tuple, list, collections.abc.Sequence):
        items = [_check_for(part) for part in parts] if origin is tuple and Ellipsis not in parts else []
        if items and all(item is not None for item in items):  # Tuple[int, Optional[int]]: item by item
            def accepts(value):
                return isinstance(value, (tuple, list)) and len(value) == len(items) and \
                    all(item[0](v) for item, v in zip(items, value))

            def convert(value):
                return tuple(v if item[2] is None else item[2](v) for item, v in zip(items, value))
            return accepts, f"a tuple ({', '.join(item[1] for item in items)})", convert
        if parts and all(part is int for part in parts if part is not Ellipsis):
            return _is_sequence_of_index, "a sequence of ints", _as_ints
        return (lambda value: isinstance(value, (tuple, list))), "a tuple or list", None
    if hint is torch.Tensor:
        return (lambda value: isinstance(value, torch.Tensor)), "a torch.Tensor", None
    if hint is int:
        return _is_index, "an int", _as_int
    if hint is float:
        return _is_real, "a real number", _as_float
    if hint is str:
        return (lambda value: isinstance(value, str)), "a str", None
    if isinstance(hint, type) and hint not in (bool, object):
        public = "torch.nn" if getattr(torch.nn, hint.__name__, None) is hint else hint.__module__
        return (lambda value: isinstance(value, hint)), f"a {public}.{hint.__qualname__}", None
    return None  # bool (anything has a truth value), Any, an unannotated parameter


def checked(function):
    """`function` with its annotated arguments' types checked first (see the module's docstring)."""
    hints = typing.get_type_hints(function)
    parameters = list(inspect.signature(function).parameters.values())
    by_name = {p.name: _check_for(hints[p.name]) for p in parameters if p.name in hints}
    positional = [by_name.get(p.name) for p in parameters
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    where = f"lab.nn.{function.__name__}()"

    def refuse(name, value, check):
        raise TypeError(f"{where}: argument '{name}' must be {check[1]}, got {type(value).__name__}")

    def convert(name, value, check):
        try:
            return check[2](value)
        except (TypeError, ValueError, OverflowError) as error:  # __index__ / __float__ returned nonsense
            raise type(error)(f"{where}: argument '{name}' could not be read as {check[1]}: {error}") from error

    @functools.wraps(function)
    def with_checks(*args, **kwargs):
        converted = None
        for index, value in enumerate(args[:len(positional)]):
            check = positional[index]
            if check is not None:
                if not check[0](value):
                    refuse(names[index], value, check)
                if check[2] is not None:
                    new = convert(names[index], value, check)
                    if new is not value:
                        converted = converted if converted is not None else list(args)
                        converted[index] = new
        for name, value in kwargs.items():
            check = by_name.get(name)
            if check is not None:
                if not check[0](value):
                    refuse(name, value, check)
                if check[2] is not None:
                    kwargs[name] = convert(name, value, check)
        return function(*(args if converted is None else converted), **kwargs)
    with_checks.__lab_checked__ = True
    return with_checks
