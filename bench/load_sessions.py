"""What the load test (bench/bench_load.py) measures the server with: its heartbeat, its memory, and the visitors
that speak Streamlit's websocket protocol without a browser.

- ``Heartbeat``: a process of its own (bench/heartbeat.py) that GETs /_stcore/health every 0.25 s and keeps each
  answer's latency (a request that fails or takes over 5 s counts as 5 s): max and p99.
- ``Memory``: a thread that sums VmRSS over the server process and its children every 0.25 s: the peak.
- ``Renicer``: with ``--nice-generator`` or ``--idle-generator``, a thread that keeps the generator's processes
  (chromium) that nice, or in SCHED_IDLE.
- ``rerun``: one script run of a page over a session's websocket (``connect_session``), its messages read up to
  the end of the run; the websocket visitors, the scripted visitor and bench_messages.py all use it.
- ``ws_sessions``: N sessions, each a websocket to /_stcore/stream that asks for a script run of one page
  after another (the ``BackMsg`` a browser sends on a page click), waits for ``script_finished``, and counts
  the runs and the exceptions drawn; all on one asyncio loop (the ``websockets`` client, which Streamlit's
  server needs too), until a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heartbeat import HEALTH_TIMEOUT_S, POLL_S  # bench/ is on the path of every script that imports this module


class Heartbeat:
    """The heartbeat (bench/heartbeat.py) in a process of its own, started with ``start`` and read with ``stop``:
    a thread of the load generator would wait for the generator's interpreter lock too (see that module)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen([sys.executable, str(Path(__file__).with_name("heartbeat.py")), self.url],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def stop(self) -> dict:
        assert self.process is not None, "start the heartbeat first"
        out, _ = self.process.communicate(timeout=HEALTH_TIMEOUT_S + 10)  # closes its stdin: it stops and reports
        return json.loads(out)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found + [grand for child in found for grand in _children(child)]


def _status_kb(pid: int, field_name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Memory(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True, name="memory")
        self.pid, self.peak_kb = pid, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            total = sum(_status_kb(p, "VmRSS") for p in [self.pid, *_children(self.pid)])
            self.peak_kb = max(self.peak_kb, total)
            self._halt.wait(POLL_S)

    def stop(self) -> dict:
        self._halt.set()
        self.join(10)
        return {"peak_tree_rss_mb": self.peak_kb / 1024, "server_vmhwm_mb": _status_kb(self.pid, "VmHWM") / 1024}


def _nice(pid: int, tid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    except (OSError, ValueError, IndexError):
        return None


class Renicer(threading.Thread):
    """Keeps the load generator behind the server: every 0.25 s, each thread of the processes this one started
    (chromium, Playwright's driver; the server's process tree and ``spared``, the heartbeat, left out) that runs
    less nice than ``nice`` is set to it, and with ``idle`` each one not yet in Linux's SCHED_IDLE class is put
    there. Chromium, run as root, raises its browser, GPU and compositor threads to nice -8 (its "display"
    priority) whatever it was started with, ahead of the server at 0."""

    def __init__(self, server_pid: int, nice: int, spared: Sequence[int] = (), idle: bool = False) -> None:
        super().__init__(daemon=True, name="renicer")
        self.server_pid, self.nice, self.spared, self.idle, self.reniced = server_pid, nice, set(spared), idle, set()
        self._halt = threading.Event()

    def _demote(self, pid: int, tid: int) -> None:
        try:
            if self.idle and os.sched_getscheduler(tid) != os.SCHED_IDLE:
                os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
                self.reniced.add(tid)
            now = _nice(pid, tid)
            if now is not None and now < self.nice:
                os.setpriority(os.PRIO_PROCESS, tid, self.nice)
                self.reniced.add(tid)
        except OSError:  # the thread has ended
            pass

    def run(self) -> None:
        while not self._halt.is_set():
            server = {self.server_pid, *_children(self.server_pid)}
            for pid in _children(os.getpid()):
                if pid in server or pid in self.spared:
                    continue
                for task in Path(f"/proc/{pid}/task").glob("*"):
                    self._demote(pid, int(task.name))
            self._halt.wait(POLL_S)

    def stop(self) -> dict:
        self._halt.set()
        self.join(10)
        return {"generator_threads_reniced": len(self.reniced)}


@dataclass
class WsStats:
    runs: int = 0
    exceptions: int = 0
    errors: list[str] = field(default_factory=list)
    run_seconds: list[float] = field(default_factory=list)


async def connect_session(url: str, cookie: str = ""):
    """A websocket to the server's /_stcore/stream, as a browser opens it (a new session); with the XSRF
    ``cookie`` ("_streamlit_xsrf=...") a page has set, its token goes along as the page's does."""
    from websockets.asyncio.client import connect

    token = cookie.partition("=")[2]
    return await connect(url.replace("http://", "ws://") + "/_stcore/stream", max_size=256 * 2**20,
                         subprotocols=["streamlit", token] if token else ["streamlit"], open_timeout=60,
                         additional_headers={"Cookie": cookie} if cookie else None)


async def rerun(connection, hashes: dict[str, str], page_hash: str = "", *, query: str = "",
                states: Sequence[tuple[str, str, Any]] = (), timeout: float = 300.0,
                seen: Callable[[Any, bytes], None] | None = None) -> None:
    """One script run of a page (``page_hash``; "" the default page), as a browser's page click asks for it: the
    ``rerun_script`` BackMsg (with the URL's ``query`` and widget ``states``, each (widget id, value field,
    value)), then every ForwardMsg up to ``script_finished``. The pages' hashes are kept in ``hashes`` (url path
    name -> hash); ``seen`` gets each message (parsed, and its bytes)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    message = BackMsg()
    message.rerun_script.query_string = query
    message.rerun_script.page_script_hash = page_hash
    for widget_id, field_name, value in states:
        state = message.rerun_script.widget_states.widgets.add()
        state.id = widget_id
        setattr(state, field_name, value)
    await connection.send(message.SerializeToString())
    while True:
        data = await asyncio.wait_for(connection.recv(), timeout=timeout)
        forward = ForwardMsg()
        forward.ParseFromString(data)
        kind = forward.WhichOneof("type")
        if kind in ("new_session", "navigation"):
            hashes.update((page.url_pathname or "", page.page_script_hash) for page in getattr(forward, kind).app_pages)
        if seen is not None:
            seen(forward, data)
        if kind == "script_finished":
            return


async def _one_session(url: str, pages: tuple[str, ...], deadline: float, stats: WsStats, start_delay: float,
                       think_s: float = 0.0) -> None:
    await asyncio.sleep(start_delay)
    connection = await connect_session(url)
    hashes: dict[str, str] = {}

    def count(forward: Any, _data: bytes) -> None:
        if forward.WhichOneof("type") == "delta" and forward.delta.WhichOneof("type") == "new_element" \
                and forward.delta.new_element.WhichOneof("type") == "exception":
            stats.exceptions += 1
            stats.errors.append(forward.delta.new_element.exception.message[:200])

    async def run(page_hash: str = "") -> None:
        started = time.monotonic()
        await rerun(connection, hashes, page_hash, timeout=max(5.0, deadline - time.monotonic() + 60), seen=count)
        stats.runs += 1
        stats.run_seconds.append(time.monotonic() - started)

    try:
        await run()
        i = 0
        while time.monotonic() < deadline:
            page = pages[i % len(pages)]
            await run(hashes.get(page, ""))
            i += 1
            if think_s:  # a visitor reads the page before the next click
                await asyncio.sleep(think_s)
    except Exception as error:  # a session's failure is a figure of the run, not the end of the test
        stats.errors.append(f"{type(error).__name__}: {error}"[:200])
    finally:
        await connection.close()


def ws_sessions(url: str, n: int, seconds: float, pages: tuple[str, ...], think_s: float = 0.0) -> WsStats:
    """``n`` websocket sessions walking ``pages`` (url path names) until ``seconds`` from now, each waiting
    ``think_s`` after a page's run before the next click (0: at once); their figures."""
    stats = WsStats()
    if n <= 0:
        return stats
    deadline = time.monotonic() + seconds

    async def main() -> None:
        await asyncio.gather(*(_one_session(url, pages[i % len(pages):] + pages[:i % len(pages)], deadline, stats,
                                            0.5 * i, think_s) for i in range(n)))

    asyncio.run(main())
    return stats


async def _scripted_visitor(url: str, cookie: str, big_file: Path, pharaoh: str, explain_hash_query: str
                            ) -> dict[str, str]:
    """A visitor's script, past every browser check: the 280 MB file PUT to the upload endpoint with a real
    session and XSRF token, and 20 MB of Pharaoh links sent as the Explain page's text box's value."""
    connection = await connect_session(url, cookie)
    found: dict[str, str] = {}
    ids: dict[str, str] = {}
    said: list[str] = []
    hashes: dict[str, str] = {}

    def seen(forward: Any, _data: bytes) -> None:
        kind = forward.WhichOneof("type")
        if kind == "new_session":
            found["session"] = forward.new_session.initialize.session_id
        elif kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
            element = forward.delta.new_element
            which = element.WhichOneof("type")
            if which in ("radio", "text_area"):
                ids[getattr(element, which).label] = getattr(element, which).id
            elif which == "alert":
                said.append(element.alert.body[:200])
            elif which == "exception":
                said.append("EXCEPTION " + element.exception.message[:200])

    async def run(query: str = "", states: list | None = None) -> float:
        started = time.monotonic()
        said.clear()
        await rerun(connection, hashes, hashes.get("explain", "") if query else "", query=query,
                    states=states or (), seen=seen)
        return time.monotonic() - started

    try:
        await run()
        found["put"] = await asyncio.to_thread(put_file, url, cookie, found.get("session", ""), big_file)
        query = explain_hash_query
        await run(query)
        radio = ids.get("Sentences")
        states = [(radio, "string_value", "My sentences and a Pharaoh file of gold links")] if radio else []
        await run(query, states)
        box = next((i for label, i in ids.items() if label.startswith("Gold links")), None)
        if box is None:
            found["pharaoh"] = f"FAILED: no Gold links box among {sorted(ids)[:12]}; said {said[:3]}"
        else:
            seconds = await run(query, [*states, (box, "string_value", pharaoh)])
            found["pharaoh"] = f"{len(pharaoh) / 2**20:.0f} MB sent, answered in {seconds:.2f} s: " + \
                (" | ".join(said) or "no message")
    finally:
        await connection.close()
    return found


def put_file(url: str, cookie: str, session: str, path: Path) -> str:
    """``path`` PUT to the upload endpoint of ``session`` as a script would (with the XSRF token a page sets)."""
    import http.client

    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    sent = 0
    try:
        connection.putrequest("PUT", f"/_stcore/upload_file/{session}/load-test-file")
        connection.putheader("Content-Type", "multipart/form-data; boundary=x")
        connection.putheader("Content-Length", str(path.stat().st_size))
        connection.putheader("Cookie", cookie)
        connection.putheader("X-Xsrftoken", cookie.partition("=")[2])
        connection.endheaders()
        with open(path, "rb") as body:
            while chunk := body.read(2**20):
                connection.send(chunk)
                sent += len(chunk)
        answer = connection.getresponse()
        return f"HTTP {answer.status} {answer.read()[:80].decode(errors='replace')} ({sent / 2**20:.0f} MB sent)"
    except OSError as error:
        return f"refused: the server closed the connection after {sent / 2**20:.0f} MB ({type(error).__name__})"
    finally:
        connection.close()


def scripted_visitor(url: str, big_file: Path, pharaoh: str, query: str) -> dict[str, str]:
    """``_scripted_visitor`` on its own loop, with the XSRF cookie the app's page sets."""
    with urllib.request.urlopen(f"{url}/_stcore/health") as answer:  # it sets the XSRF cookie, as the page does
        cookie = next((c.split(";")[0] for c in answer.headers.get_all("Set-Cookie") or []
                       if c.startswith("_streamlit_xsrf=")), "")
    found: dict[str, str] = {}
    # its own thread: the caller (Playwright's sync API) runs an event loop already
    def visit() -> None:
        try:
            found.update(asyncio.run(_scripted_visitor(url, cookie, big_file, pharaoh, query)))
        except Exception as error:  # the case's failure is its outcome
            found["error"] = f"FAILED: {type(error).__name__}: {error}"[:300]

    worker = threading.Thread(target=visit)
    worker.start()
    worker.join(600)
    return found
