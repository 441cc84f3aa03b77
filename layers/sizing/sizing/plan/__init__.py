"""Architecture search, cost projection and ranking: the product's answer to "what should we run this on?"."""

from sizing.plan.search import DEFAULT_HEADROOM, estimate

__all__ = ["DEFAULT_HEADROOM", "estimate"]
