"""Drives a gateway with the official A2A SDK's own client, in one protocol version.

Usage: drive.py BASE_URL VERSION   (VERSION: 1.0 or 0.3)

Fetches the card (the 1.0 card at /.well-known/agent-card.json; for 0.3 the card at
/.well-known/agent.json read as a 0.3-only client reads it), then sends, streams, gets and asks
for an unknown task. Prints one JSON line of what it saw; exits non-zero on any failure.
"""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError


def message(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
        )
    )


async def main(base: str, version: str) -> dict:
    seen: dict = {"version": version}
    async with httpx.AsyncClient(timeout=30) as http:
        if version == "1.0":
            card = await A2ACardResolver(http, base).get_agent_card()
        else:
            raw = (await http.get(f"{base}/.well-known/agent.json")).json()
            raw.pop("supportedInterfaces")  # what a 0.3 client knows of a card
            card = parse_agent_card(raw)
        seen["card"] = {
            "name": card.name,
            "streaming": card.capabilities.streaming,
            "interfaces": [
                [i.protocol_binding, i.protocol_version, i.url]
                for i in card.supported_interfaces
            ],
        }

    blocking = ClientFactory(ClientConfig(streaming=False)).create(card)
    streaming = ClientFactory(ClientConfig(streaming=True)).create(card)
    seen["transport"] = type(blocking._transport).__name__

    # send: one blocking call, the settled task back.
    sent = [r async for r in blocking.send_message(message("hi there"))]
    task = sent[-1].task
    seen["send"] = {
        "state": TaskState.Name(task.status.state),
        "text": "".join(p.text for a in task.artifacts for p in a.parts),
        "id": task.id,
        "context": task.context_id,
    }

    # stream: the task first, then updates, until the terminal state.
    kinds, text, states = [], "", []
    async for r in streaming.send_message(message("stream please")):
        kind = r.WhichOneof("payload")
        kinds.append(kind)
        if kind == "task":
            states.append(TaskState.Name(r.task.status.state))
            stream_task = r.task.id
        elif kind == "status_update":
            states.append(TaskState.Name(r.status_update.status.state))
        elif kind == "artifact_update":
            text += "".join(p.text for p in r.artifact_update.artifact.parts)
    seen["stream"] = {"kinds": kinds, "states": states, "text": text}

    # get: the streamed task, now finished.
    got = await blocking.get_task(GetTaskRequest(id=stream_task))
    seen["get"] = {
        "id": got.id,
        "state": TaskState.Name(got.status.state),
        "text": "".join(p.text for a in got.artifacts for p in a.parts),
    }

    # not found: the SDK raises its own TaskNotFoundError for -32001.
    try:
        await blocking.get_task(GetTaskRequest(id="no-such-task"))
        seen["not_found"] = "no error"
    except TaskNotFoundError as e:
        seen["not_found"] = type(e).__name__
    except A2AClientError as e:
        seen["not_found"] = f"{type(e).__name__}: {e}"

    await blocking.close()
    await streaming.close()
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
