"""A booking agent with a planted race, and the same agent fixed.

``RacyBookingAgent.book_table`` checks whether the caller already has a table, then confirms
with the restaurant (a slow call), then books: check-then-act across an ``await``. Tools keep
running when the user interrupts (so their results are not lost), so an impatient caller who
asks again while the first confirmation is still in flight gets two tables.
``BookingAgent`` holds a lock across the check and the booking.

``tests/test_testing_api.py`` shows Hypothesis finding the race with
``agents_trio.testing.strategies.conversations`` and shrinking it to two requests; the README
walks through it. Run this file to see the shrunk schedule and the violation.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, RunContext, function_tool


class Restaurant:
    """The restaurant's booking system (a fake with a slow confirmation)."""

    def __init__(self) -> None:
        self.bookings: list[tuple[str, str]] = []

    def has_booking(self, name: str) -> bool:
        return any(who == name for who, _ in self.bookings)

    async def confirm(self, time: str) -> None:
        await trio.sleep(2.0)  # the restaurant's API is slow

    def book(self, name: str, time: str) -> None:
        self.bookings.append((name, time))


class RacyBookingAgent(Agent):
    def __init__(self, restaurant: Restaurant) -> None:
        super().__init__(instructions="You book tables at the restaurant.")
        self.restaurant = restaurant

    @function_tool
    async def book_table(self, ctx: RunContext, time: str) -> str:
        """Book a table for the caller.

        Args:
            time: When
        """
        if self.restaurant.has_booking("caller"):
            return "You already have a table."
        await self.restaurant.confirm(time)
        self.restaurant.book("caller", time)
        return f"Booked for {time}."


class BookingAgent(RacyBookingAgent):
    def __init__(self, restaurant: Restaurant) -> None:
        super().__init__(restaurant)
        self._booking = trio.Lock()

    @function_tool
    async def book_table(self, ctx: RunContext, time: str) -> str:
        """Book a table for the caller.

        Args:
            time: When
        """
        async with self._booking:  # the check and the booking are one step
            if self.restaurant.has_booking("caller"):
                return "You already have a table."
            await self.restaurant.confirm(time)
            self.restaurant.book("caller", time)
        return f"Booked for {time}."


def at_most_one_table(restaurant: Restaurant):
    """An invariant of our own: the caller never holds two tables."""

    def one_table(record):
        if len(restaurant.bookings) > 1:
            return f"the caller got {len(restaurant.bookings)} tables: {restaurant.bookings}"
        return None

    return one_table


if __name__ == "__main__":  # python examples/booking_race.py
    import logging

    from hypothesis import given, settings

    from agents_trio.testing import DEFAULT_INVARIANTS, check_conversation
    from agents_trio.testing.strategies import conversations

    logging.disable(logging.ERROR)  # the runtime logs every injected failure
    invariants = DEFAULT_INVARIANTS

    @settings(derandomize=True, database=None, deadline=None, max_examples=300)
    @given(conversations(tools={"book_table": {"time": "7pm"}}, faults=False))
    def test_books_at_most_one_table(schedule):
        restaurant = Restaurant()
        check_conversation(lambda: RacyBookingAgent(restaurant), schedule,
                           invariants=invariants,
                           extra_invariants=[at_most_one_table(restaurant)])

    test_books_at_most_one_table()
