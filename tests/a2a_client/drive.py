"""Drives a gateway with the official A2A SDK's own client, in one protocol version.

Usage: drive.py BASE_URL VERSION   (VERSION: 1.0, 0.3, or rest: 1.0 over the HTTP+JSON binding)

Fetches the card (the 1.0 card at /.well-known/agent-card.json; for 0.3 the card at
/.well-known/agent.json read as a 0.3-only client reads it), then sends, streams, gets and asks
for an unknown task; gets a task's history trimmed by historyLength; cancels a held task (the
fake sid holds a turn whose text says "hold"); lists tasks page by page (1.0); and configures a
push webhook, served by a receiver started here, that gets the updates of a task run to its end.
Prints one JSON line of what it saw; exits non-zero on any failure.
"""

import asyncio
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError


def message(text: str, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context_id,
            task_id=task_id,
        )
    )


def webhook_receiver():
    """A webhook on a free loopback port: its URL, and the (authorization, body) it gets."""
    got = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            got.append((self.headers.get("authorization"), json.loads(body)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}/hook", got, server


def state_of(update: dict) -> str:
    for key in ("statusUpdate", "task"):
        if key in update:
            return update[key]["status"]["state"]
    return ""


async def main(base: str, version: str) -> dict:
    seen: dict = {"version": version}
    async with httpx.AsyncClient(timeout=30) as http:
        if version in ("1.0", "rest"):
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

    bindings = {"supported_protocol_bindings": ["HTTP+JSON"]} if version == "rest" else {}
    blocking = ClientFactory(ClientConfig(streaming=False, **bindings)).create(card)
    streaming = ClientFactory(ClientConfig(streaming=True, **bindings)).create(card)
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

    # history: the user's message and the agent's answer; historyLength keeps the newest.
    full = await blocking.get_task(GetTaskRequest(id=stream_task))
    one = await blocking.get_task(GetTaskRequest(id=stream_task, history_length=1))
    seen["history"] = {
        "roles": [Role.Name(m.role) for m in full.history],
        "first": "".join(p.text for p in full.history[0].parts) if full.history else "",
        "trimmed": [Role.Name(m.role) for m in one.history],
    }

    # cancel: a held task (waiting for input) is canceled.
    held = [r async for r in blocking.send_message(message("hold please"))][-1].task
    canceled = await blocking.cancel_task(CancelTaskRequest(id=held.id))
    seen["cancel"] = {
        "before": TaskState.Name(held.status.state),
        "after": TaskState.Name(canceled.status.state),
    }

    if version in ("1.0", "rest"):
        # list: three tasks in a context the client names, two to a page.
        ctx = f"sdk-{uuid.uuid4()}"
        made = []
        for i in range(3):
            t = [r async for r in blocking.send_message(message(f"list {i}", ctx))][-1].task
            made.append(t.id)
        pages, token, listed, totals = [], "", [], []
        while True:
            page = await blocking.list_tasks(
                ListTasksRequest(context_id=ctx, page_size=2, page_token=token)
            )
            pages.append(len(page.tasks))
            totals.append(page.total_size)
            listed += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        seen["list"] = {
            "pages": pages,
            "totals": totals,
            "newest_first": listed == list(reversed(made)),
        }

        # push: a webhook for a held task, which is then run to its end.
        url, got, server = webhook_receiver()
        held = [r async for r in blocking.send_message(message("hold for push"))][-1].task
        cfg = await blocking.create_task_push_notification_config(
            TaskPushNotificationConfig(
                task_id=held.id,
                id="sdk-hook",
                url=url,
                authentication=AuthenticationInfo(scheme="Bearer", credentials="sdk-secret"),
            )
        )
        configs = await blocking.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=held.id)
        )
        [r async for r in blocking.send_message(message("done", task_id=held.id))]
        for _ in range(100):
            if got and state_of(got[-1][1]) == "TASK_STATE_COMPLETED":
                break
            await asyncio.sleep(0.1)
        await blocking.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=held.id, id="sdk-hook")
        )
        after = await blocking.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=held.id)
        )
        server.shutdown()
        seen["push"] = {
            "created": cfg.id,
            "listed": [c.id for c in configs.configs],
            "auth": sorted({a or "" for a, _ in got}),
            "last_state": state_of(got[-1][1]) if got else "",
            "after_delete": len(after.configs),
        }

    await blocking.close()
    await streaming.close()
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
