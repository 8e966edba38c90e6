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
        none = await refusal(None)
        assert (none.code, none.error and none.error["code"]) == (4401, "missing_key")
        wrong = await refusal("not-the-key")
        assert (wrong.code, wrong.error and wrong.error["code"]) == (4401, "unknown_key")
        right = await refusal(key)
        assert (right.code, right.error and right.error["code"]) == (4404, "unknown_agent"), "authenticated, then routed"

    asyncio.run(run())
