"""What a run may spend: the `Budget` ceiling, and the bookkeeping that holds estimates in flight.

A request is admitted only if what is already billed, plus the estimates held by requests in flight,
plus its own estimate, stays within the budget; its real count replaces its estimate when it settles.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gwlab.errors import InvalidRequest
from gwlab.frames.families import Family
from gwlab.frames.usage import PriceTable

__all__ = ["Budget", "Spend"]


@dataclass(frozen=True)
class Budget:
    """A ceiling on what one run may spend: billed tokens, dollars (with `prices`), or both."""

    tokens: int | None = None
    cost: float | None = None
    prices: PriceTable | Mapping[str, Any] | None = None

    @classmethod
    def of(cls, value: int | float | Budget | None, prices: Any = None) -> Budget | None:
        if value is None or isinstance(value, Budget):
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidRequest("budget", f"a whole number of tokens, or Budget(cost=..., prices=...); "
                                           f"got {value!r}")
        return cls(tokens=value, prices=prices)


class Spend:
    """Budget bookkeeping: billed so far plus reservations of requests in flight."""

    def __init__(self, budget: Budget | None, prices: PriceTable, family: Family) -> None:
        self.budget, self.prices, self.family = budget, prices, family
        self.tokens = 0.0
        self.cost = 0.0
        self.held_tokens = 0.0
        self.held_cost = 0.0
        self.in_flight = 0
        self.changed = asyncio.Condition()
        # the model's price, looked up once (the table matches globs) and applied to every request
        self._table = PriceTable({family.model: price}) if (price := prices.price(family.model)) else PriceTable()

    def _price(self, tokens_in: float, tokens_out: float) -> tuple[float, float]:
        billed = tokens_in + (tokens_out if self.family.charges_output else 0)
        cost = self._table.cost(self.family.model, self.family.endpoint, tokens_in, tokens_out)
        return billed, cost

    def fits(self, tokens_in: float, tokens_out: float) -> bool:
        if self.budget is None:
            return True
        billed, cost = self._price(tokens_in, tokens_out)
        if self.budget.tokens is not None and self.tokens + self.held_tokens + billed > self.budget.tokens:
            return False
        if self.budget.cost is not None:
            if math.isnan(cost):
                raise InvalidRequest("budget", f"no price for model {self.family.model!r}: a cost budget "
                                               "needs prices=")
            if self.cost + self.held_cost + cost > self.budget.cost:
                return False
        return True

    def hold(self, tokens_in: float, tokens_out: float) -> tuple[float, float]:
        billed, cost = self._price(tokens_in, tokens_out)
        self.held_tokens += billed
        self.held_cost += 0.0 if math.isnan(cost) else cost
        self.in_flight += 1
        return billed, 0.0 if math.isnan(cost) else cost

    async def settle(self, held: tuple[float, float], tokens_in: float, tokens_out: float) -> None:
        self.held_tokens -= held[0]
        self.held_cost -= held[1]
        self.in_flight -= 1
        billed, cost = self._price(tokens_in, tokens_out)
        self.tokens += billed
        self.cost += cost
        if self.budget is not None:  # only a budget makes requests wait for others to settle
            async with self.changed:
                self.changed.notify_all()
