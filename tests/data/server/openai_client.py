"""Talks to `dllm serve` with the official `openai` Python package (tests/suite/server.rs).

Usage: openai_client.py BASE_URL STATUS_URL KEYED_BASE_URL KEY
Checks chat without and with streaming (per-step events arrive; the streamed text equals
the non-streamed answer at temperature 0), completions, four clients at once, a disconnect
that cancels its run (seen on the status endpoint), and 401 for a missing or wrong key.
Prints one line per check; exits non-zero on the first failure.
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

base, status_url, keyed_base, key = sys.argv[1:5]
# A hang must fail the check, not wait out the client's default 600 s and retry.
LIMITS = dict(timeout=60, max_retries=0)
client = openai.OpenAI(base_url=base, api_key="unused", **LIMITS)
messages = [{"role": "user", "content": "Once upon a time"}]
settings = dict(model="dllm-demo", max_tokens=32, temperature=0)


def status():
    with urllib.request.urlopen(status_url, timeout=60) as r:
        return json.loads(r.read())


models = client.models.list()
assert [m.id for m in models.data] == ["dllm-demo"], models
print("models: ok")

whole = client.chat.completions.create(messages=messages, **settings)
text = whole.choices[0].message.content
assert whole.choices[0].finish_reason in ("stop", "length"), whole
assert whole.usage.completion_tokens > 0 and whole.usage.prompt_tokens > 0, whole.usage
assert text, whole
print("chat: ok,", repr(text[:60]))

stream = client.chat.completions.create(messages=messages, stream=True, **settings)
steps, pieces, finish, usage = [], [], None, None
for chunk in stream:
    extra = chunk.model_extra or {}
    if "diffusion" in extra:
        steps.append(extra["diffusion"])
    for choice in chunk.choices:
        if choice.delta and choice.delta.content:
            pieces.append(choice.delta.content)
        if choice.finish_reason:
            finish = choice.finish_reason
    if chunk.usage:
        usage = chunk.usage
assert len(steps) >= 2 and steps[0]["step"] == 1, steps[:2]
assert steps[0]["masked"] > steps[-1]["masked"], (steps[0], steps[-1])
assert all("answer" in s and s["steps"] >= s["step"] for s in steps), steps
assert "".join(pieces) == text, ("".join(pieces), text)
assert finish == whole.choices[0].finish_reason and usage.completion_tokens == whole.usage.completion_tokens
print(f"chat stream: ok, {len(steps)} step events, same text")

completion = client.completions.create(prompt="Once upon a time, there was", **settings)
assert completion.choices[0].text, completion
assert completion.object == "text_completion"
print("completions: ok")

answers = [None] * 4
def ask(i):
    c = openai.OpenAI(base_url=base, api_key="unused", **LIMITS)
    r = c.chat.completions.create(messages=[{"role": "user", "content": f"Tell a story number {i}"}], **settings)
    answers[i] = r.choices[0].message.content
threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert all(answers), answers
print("four clients at once: ok")

before = status()["cancelled"]
long = dict(settings, max_tokens=192)
stream = client.chat.completions.create(messages=messages, stream=True, **long)
seen = 0
for chunk in stream:
    seen += 1
    if seen == 3:
        break
stream.close()
deadline = time.time() + 30
while status()["cancelled"] == before and time.time() < deadline:
    time.sleep(0.05)
s = status()
assert s["cancelled"] == before + 1, s
print("disconnect cancels: ok", s)

# No key at all: the client insists on one, so this request is made by hand.
request = urllib.request.Request(keyed_base + "/chat/completions", data=json.dumps(dict(messages=messages, **settings)).encode(),
                                 headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(request, timeout=60)
    raise AssertionError("a request without a key was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 401 and json.loads(e.read())["error"]["code"] == "invalid_api_key"
c = openai.OpenAI(base_url=keyed_base, api_key="wrong-key", **LIMITS)
try:
    c.chat.completions.create(messages=messages, **settings)
    raise AssertionError("a wrong key was accepted")
except openai.AuthenticationError as e:
    assert e.status_code == 401
c = openai.OpenAI(base_url=keyed_base, api_key=key, **LIMITS)
assert c.chat.completions.create(messages=messages, **settings).choices[0].message.content
print("api key: ok")
