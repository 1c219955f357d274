"""The error hierarchy: every user-facing failure is one of these, rooted in ValueError/TypeError."""


class ScheduleError(ValueError):
    """An illegal schedule primitive (names the stage, the axis and the rule)."""


class InstantiationError(ValueError):
    """A config that is illegal for the template's shape; such points are never measured."""


class BuildError(ValueError):
    """Lowered IR that a backend cannot compile (names the node or the construct)."""


class ArgumentError(TypeError):
    """A call of a built function with a wrong argument (names it, expected vs actual)."""


def check(cond: object, msg: str, error: type[Exception] = ScheduleError) -> None:
    """Raise `error(msg)` unless `cond`: one line per rule at every validation site."""
    if not cond:
        raise error(msg)
