"""A patch of hypothesis internals, so that a derandomized run draws the same examples in every process
(`kcm conform`, one test file, a whole pytest session): see `no_local_constants`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from hypothesis.internal.conjecture import providers

_CONSTANTS_HOOK: Final = "_get_local_constants"


@contextmanager
def no_local_constants() -> Iterator[None]:
    """Hypothesis now and then draws a literal found in the source of any non-installed module the process
    has loaded; that pool differs between `kcm conform`, a test file and a whole pytest session, so the same
    derandomized budget would explore different examples in each. An empty pool makes it draw the same ones
    everywhere (the hook is internal to hypothesis, hence the guard)."""
    hook = getattr(providers, _CONSTANTS_HOOK, None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if hook is None or cache is None:
        yield
        return
    from hypothesis.internal.constants_ast import Constants

    empty = Constants()
    setattr(providers, _CONSTANTS_HOOK, lambda: empty)
    cache.cache.clear()
    try:
        yield
    finally:
        setattr(providers, _CONSTANTS_HOOK, hook)
        cache.cache.clear()
