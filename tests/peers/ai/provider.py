"""A model provider for the agent's tests, written from the published wire formats and apart
from svc's client: OpenAI's chat completions (`POST /v1/chat/completions`, streamed as
server-sent events with `tool_calls` deltas and a final `usage` chunk) and Anthropic's messages
(`POST /v1/messages`, with `tool_use` blocks), and both formats' `GET /v1/models`.

The "model" is a script keyed on the last user message:
  "ack <id>"  calls the tool alert_ack with that id
  "list"      calls alerts_list with status open
  "slow"      waits 3 s, then answers
  "fail"      answers 500 with an error document
  anything else is echoed: "echo: <message>"
After a tool result it answers "tool said: <the result>". Every call costs 10 tokens.
Each request is appended to LOG as one JSON line: path, the auth header, the body.

usage: provider.py PORT KEY LOG
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, KEY, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]


def decide(messages):
    """The script: what to answer to these messages, as (text, tool_call or None)."""
    last = messages[-1]
    if last["role"] == "tool" or (
        isinstance(last.get("content"), list) and any(b.get("type") == "tool_result" for b in last["content"])
    ):
        if last["role"] == "tool":
            result = last["content"]
        else:
            result = next(b["content"] for b in last["content"] if b.get("type") == "tool_result")
        return "tool said: " + str(result)[:300], None
    content = last.get("content")
    if isinstance(content, list):
        content = "".join(b.get("text", "") for b in content)
    if content.startswith("ack "):
        return "", ("alert_ack", {"id": content[4:].strip(), "comment": "acked by the agent"})
    if content == "list":
        return "", ("alerts_list", {"status": "open"})
    if content == "slow":
        time.sleep(3)
    return "echo: " + content, None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def record(self, body):
        with open(LOG, "a") as f:
            f.write(json.dumps({
                "path": self.path,
                "authorization": self.headers.get("Authorization"),
                "x-api-key": self.headers.get("x-api-key"),
                "anthropic-version": self.headers.get("anthropic-version"),
                "body": body,
            }) + "\n")

    def authorized(self):
        return self.headers.get("Authorization") == f"Bearer {KEY}" or self.headers.get("x-api-key") == KEY

    def send_json(self, status, doc):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.record(None)
        if not self.authorized():
            return self.send_json(401, {"error": {"message": "invalid api key", "type": "auth"}})
        if self.path == "/v1/models":
            return self.send_json(200, {"object": "list", "data": [{"id": "fake-1", "object": "model"}, {"id": "fake-2", "object": "model"}]})
        self.send_json(404, {"error": {"message": "no such route"}})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.record(body)
        if not self.authorized():
            return self.send_json(401, {"error": {"message": "invalid api key", "type": "auth"}})
        messages = body.get("messages", [])
        last = messages[-1].get("content") if messages else ""
        if last == "fail" or (isinstance(last, list) and any(b.get("text") == "fail" for b in last)):
            return self.send_json(500, {"error": {"message": "the model is overloaded", "type": "server_error"}})
        text, call = decide(messages)
        if self.path == "/v1/chat/completions":
            return self.stream_completion(body, text, call)
        if self.path == "/v1/messages":
            content = [{"type": "text", "text": text}] if text else []
            if call:
                content.append({"type": "tool_use", "id": "toolu_1", "name": call[0], "input": call[1]})
            return self.send_json(200, {
                "id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
                "content": content, "stop_reason": "tool_use" if call else "end_turn",
                "usage": {"input_tokens": 6, "output_tokens": 4},
            })
        self.send_json(404, {"error": {"message": "no such route"}})

    def stream_completion(self, body, text, call):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(doc):
            data = f"data: {doc}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": body.get("model")}
        send(json.dumps({**base, "choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
        # The text in two pieces, as a model streams it.
        half = len(text) // 2
        for piece in (text[:half], text[half:]):
            if piece:
                send(json.dumps({**base, "choices": [{"index": 0, "delta": {"content": piece}}]}))
        if call:
            args = json.dumps(call[1])
            send(json.dumps({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": call[0], "arguments": args[:5]}}]}}]}))
            send(json.dumps({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": args[5:]}}]}}]}))
        send(json.dumps({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if call else "stop"}]}))
        send(json.dumps({**base, "choices": [], "usage": {"prompt_tokens": 6, "completion_tokens": 4, "total_tokens": 10}}))
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
