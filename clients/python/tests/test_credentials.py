"""Credentials against a real `switchboard gateway` with an API keys file: without a key and
with a wrong one the gateway refuses the session (4401, its own codes); with the right key,
sent as `Authorization: Bearer`, the session passes authentication and is refused only
because the gateway's (empty) routing table has no such agent (4404)."""

from __future__ import annotations

import asyncio

import pytest
from conftest import url

from switchboard_client import Session, SessionRefused


def test_the_gateway_takes_the_api_key_as_a_bearer_credential(gateway: tuple[str, str]) -> None:
    address, key = gateway

    async def refusal(api_key: str | None) -> SessionRefused:
        with pytest.raises(SessionRefused) as refused:
            await Session.connect(url(address), api_key=api_key, start={"agent": "triage"})
        return refused.value

    async def run() -> None:
        # Refused before the gateway reads the session_start, it closes at once: the unread
        # start makes its socket reset, which can beat the close frame (1006) and even the
        # bidi_error. Whatever arrived must be this refusal.
        for api_key, error in ((None, "missing_key"), ("not-the-key", "unknown_key")):
            refused = await refusal(api_key)
            assert refused.code in (4401, 1006), refused
            if refused.code == 4401 or refused.error:
                assert refused.error and refused.error["code"] == error, refused
        right = await refusal(key)
        assert (right.code, right.error and right.error["code"]) == (4404, "unknown_agent"), "authenticated, then routed"

    asyncio.run(run())
