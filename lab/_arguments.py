"""Type checks for the Python faces' functions (lab.nn, lab.jax), read from their annotations: what
the C binding's signature tables are for lab.lab, the annotations are for the faces. A face's
`checked` decorator reads a function's type hints once, at import, and on every call refuses a wrong
type before the body runs - a TypeError naming the function, the argument and what it expected, as
torch's and jax.numpy's own functions do - so a list or None where an array belongs never surfaces
as an AttributeError from deep inside, and a function added later is checked by the same rule the
day it carries annotations.

Only types are checked, cheaply (isinstance, or the presence of __index__ / __float__); an int or a
real number that is not already a Python int or float (a NumPy scalar, anything with __index__ or
__float__) is converted here, once, so the body never runs a caller's conversion in the middle of
its arithmetic. Values - ranges, shapes, dtypes - are checked where they are used (the framework's
functions, or lab's binding), and a compiler's symbolic sizes pass as they are. Imports neither torch
nor jax: each face names its own types (Rules)."""
import collections.abc
import functools
import inspect
import operator
import typing
from typing import Optional


class Rules:
    """One face's rules: its name for messages ("lab.nn"), checks for its framework's types (a hint
    -> (accepts, what it expected[, convert])), the symbolic numbers its compiler passes for ints and floats
    (left as they are), and the types that have __float__ without being numbers (its arrays)."""

    def __init__(self, face, types, symbolic_ints=(), symbolic_reals=(), not_reals=()):
        self.face, self.types = face, dict(types)
        ints, reals = tuple(symbolic_ints), tuple(symbolic_ints) + tuple(symbolic_reals)
        not_reals = (complex, str, bytes) + tuple(not_reals)

        # A check is a tuple: accepts(value) -> bool, what it expected (for the message), and
        # convert(value) -> the Python int, float or tuple of ints the body gets (None where the value
        # passes as it is). They run on every call, so the plain case returns at the first test.
        def is_index(value):
            return type(value) is int or hasattr(type(value), "__index__") or isinstance(value, ints)

        def is_real(value):
            return type(value) is float or type(value) is int or isinstance(value, reals) or \
                (hasattr(type(value), "__float__") and not isinstance(value, not_reals))

        def as_int(value):
            return value if type(value) is int or isinstance(value, ints) else operator.index(value)

        def as_float(value):
            return value if type(value) in (float, int) or isinstance(value, reals) else float(value)

        def is_sequence_of_index(value):
            if type(value) is not tuple and type(value) is not list and (
                    not isinstance(value, collections.abc.Sequence) or isinstance(value, (str, bytes))):
                return False
            for item in value:
                if type(item) is not int and not is_index(item):
                    return False
            return True

        def as_ints(value):
            if type(value) is tuple:
                for item in value:
                    if type(item) is not int:
                        break
                else:
                    return value  # a tuple of ints already: the common case, returned as it is
            return tuple(as_int(item) for item in value)

        self.int_check = (is_index, "an int", as_int)
        self.real_check = (is_real, "a real number", as_float)
        self.ints_check = (is_sequence_of_index, "a sequence of ints", as_ints)

    def check_for(self, hint) -> Optional[tuple]:
        """The check a type hint stands for; None where it asks for nothing checkable (Any, bool, no
        hint)."""
        if hint in self.types:
            accepts, expected, *convert = self.types[hint]
            return accepts, expected, (convert[0] if convert else None)
        origin, parts = typing.get_origin(hint), typing.get_args(hint)
        if origin is typing.Union:
            checks = [self.check_for(part) for part in parts if part is not type(None)]
            return None if any(check is None for check in checks) else _union(checks, type(None) in parts)
        if origin in (tuple, list, collections.abc.Sequence):
            items = [self.check_for(part) for part in parts] if origin is tuple and Ellipsis not in parts else []
            if items and all(item is not None for item in items):  # Tuple[int, Optional[int]]: item by item
                return _fixed_tuple(items)
            if parts and all(part is int for part in parts if part is not Ellipsis):
                return self.ints_check
            return (lambda value: isinstance(value, (tuple, list))), "a tuple or list", None
        if hint is int:
            return self.int_check
        if hint is float:
            return self.real_check
        if hint is str:
            return (lambda value: isinstance(value, str)), "a str", None
        if isinstance(hint, type) and hint not in (bool, object):
            return (lambda value: isinstance(value, hint)), f"a {_public_name(hint)}", None
        return None  # bool (anything has a truth value), Any, an unannotated parameter

    def checked(self, function):
        """`function` with its annotated arguments' types checked first (see the module's docstring)."""
        hints = typing.get_type_hints(function)
        parameters = list(inspect.signature(function).parameters.values())
        by_name = {p.name: self.check_for(hints[p.name]) for p in parameters if p.name in hints}
        ordered = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        positional = [by_name.get(name) for name in ordered]
        where = f"{self.face}.{function.__name__}()"

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
                        refuse(ordered[index], value, check)
                    if check[2] is not None:
                        new = convert(ordered[index], value, check)
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


def _public_name(cls) -> str:
    """torch.nn.Module rather than torch.nn.modules.module.Module: the shortest public path."""
    parts = cls.__module__.split(".")
    for length in range(1, len(parts) + 1):
        module = __import__(".".join(parts[:length]), fromlist=["_"])
        if getattr(module, cls.__name__, None) is cls:
            return f"{'.'.join(parts[:length])}.{cls.__qualname__}"
    return f"{cls.__module__}.{cls.__qualname__}"


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


def _fixed_tuple(items):
    """Tuple[A, B]: a tuple or list of exactly len(items), each accepted (and converted) by its own."""
    def accepts(value):
        return isinstance(value, (tuple, list)) and len(value) == len(items) and \
            all(item[0](v) for item, v in zip(items, value))

    def convert(value):
        return tuple(v if item[2] is None else item[2](v) for item, v in zip(items, value))
    return accepts, f"a tuple ({', '.join(item[1] for item in items)})", convert
