"""Architecture search, cost projection and ranking: the product's answer to "what should we run this on?".

`estimate` (and `DEFAULT_HEADROOM`) are loaded on first use: a module that needs only `sizing.plan.cost` or
another light part (the manifests' zone count, the budget guard) does not import the search and its simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sizing.plan.search import DEFAULT_HEADROOM, estimate

__all__ = ["DEFAULT_HEADROOM", "estimate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from sizing.plan import search

        return getattr(search, name)
    raise AttributeError(f"module 'sizing.plan' has no attribute {name!r}")
