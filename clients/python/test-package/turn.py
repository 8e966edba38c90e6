"""One text turn through the installed package (run by run.sh with the wheel's virtualenv):
the front desk hands a balance question to identity verification, which asks who is calling.
Args: the session URL, the package's version (the protocol's)."""

import asyncio
import importlib.metadata
import sys
from pathlib import Path

import switchboard_client
from switchboard_client import Session


async def main(url: str, version: str) -> None:
    installed = importlib.metadata.version("switchboard-client")
    where = Path(switchboard_client.__file__).resolve()
    assert installed == version == switchboard_client.PROTOCOL_VERSION, (installed, version)
    assert "site-packages" in where.parts, f"not the installed package: {where}"
    replies: list[str] = []
    handoffs: list[str] = []
    async with await Session.connect(url, start={"agent": "triage"}) as session:
        session.on("handoff", lambda m: handoffs.append(f"{m['from']} -> {m['to']}"))
        session.on(
            "bidi_transcript_stream",
            lambda m: replies.append(m["text"]) if m["role"] == "assistant" and m.get("is_final") else None,
        )
        done = asyncio.ensure_future(session.next("bidi_response_complete", lambda m: m["stop_reason"] != "handoff", 60))
        await session.send_text("I'd like to check my balance")
        await done
        agent = session.agent
    assert agent == "idv" and "triage -> idv" in handoffs and replies, (agent, handoffs, replies)
    print(f"switchboard-client {installed} from its wheel: triage -> idv, {replies[-1]!r}")


asyncio.run(main(sys.argv[1], sys.argv[2]))
