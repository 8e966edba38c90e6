"""A session the gateway queues for a slot of the model quota waits for its turn past the
client's start timeout, against a real `switchboard local` whose pool allows one session."""

from __future__ import annotations

import asyncio

from conftest import connect

from switchboard_client.protocol import BidiSessionQueuedMessage


def test_a_queued_session_waits_past_its_start_timeout_and_starts_when_the_slot_frees(local_one_slot: str) -> None:
    async def run() -> None:
        first = await connect(local_one_slot)
        places: list[BidiSessionQueuedMessage] = []
        second = asyncio.ensure_future(connect(local_one_slot, start_timeout=1.5, on_queued=places.append))
        # Three start timeouts later it still waits, its place kept.
        await asyncio.sleep(4.5)
        assert not second.done(), "not started (nor refused) while the slot is held"
        assert places and places[0]["position"] == 1, places
        assert places[0].get("message"), "a hold message to show"
        await first.close()
        session = await asyncio.wait_for(second, 30)
        assert session.agent == "triage"
        closed = await session.close()
        assert closed.code == 1000

    asyncio.run(run())


def test_a_queued_session_whose_wait_is_cancelled_gives_up_its_place(local_one_slot: str) -> None:
    async def run() -> None:
        first = await connect(local_one_slot)
        places: list[BidiSessionQueuedMessage] = []
        waiting = asyncio.ensure_future(connect(local_one_slot, start_timeout=1.5, on_queued=places.append))
        while not places:
            await asyncio.sleep(0.05)
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(1.0)  # the gateway reads the closed connection
        # The next one in line is first: the cancelled one left the queue.
        later: list[BidiSessionQueuedMessage] = []
        third = asyncio.ensure_future(connect(local_one_slot, start_timeout=1.5, on_queued=later.append))
        while not later:
            await asyncio.sleep(0.05)
        assert later[0]["position"] == 1, later
        await first.close()
        session = await asyncio.wait_for(third, 30)
        await session.close()

    asyncio.run(run())
