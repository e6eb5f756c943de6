"""How many messages each page's script run sends the browser (prints figures; never a test).

    python bench/bench_messages.py [--models-dir pretrained] [--repeats 2]

Every message a run sends (an element's delta, a URL update, the run's status) goes through the server's event
loop, the thread that also answers /_stcore/health: under the load test (bench/bench_load.py) that loop is the
heartbeat's bottleneck, so fewer messages per run is less of its time. One server (``tests/devserver.py``) on the
folder's models, one websocket session (``load_sessions``' protocol) that walks the pages; the last round's count
per page, by message kind, and its bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from devserver import serve  # noqa: E402

PAGES = ("model", "tokenization", "embeddings", "attention", "explain", "decoding")


async def walk(url: str, repeats: int) -> dict[str, tuple[int, int, dict[str, int]]]:
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.asyncio.client import connect

    connection = await connect(url.replace("http://", "ws://") + "/_stcore/stream", max_size=2**28,
                               subprotocols=["streamlit"], open_timeout=60)
    hashes: dict[str, str] = {}

    async def run(page_hash: str = "") -> tuple[int, int, dict[str, int]]:
        message = BackMsg()
        message.rerun_script.page_script_hash = page_hash
        message.rerun_script.query_string = ""
        await connection.send(message.SerializeToString())
        kinds: collections.Counter[str] = collections.Counter()
        size = 0
        while True:
            data = await connection.recv()
            forward = ForwardMsg()
            forward.ParseFromString(data)
            kind = forward.WhichOneof("type")
            kinds[kind] += 1
            size += len(data)
            if kind in ("new_session", "navigation"):
                hashes.update((p.url_pathname or "", p.page_script_hash) for p in getattr(forward, kind).app_pages)
            if kind == "script_finished":
                return sum(kinds.values()), size, dict(kinds)

    await run()
    counts = {}
    for _ in range(repeats):
        counts = {page: await run(hashes.get(page, "")) for page in PAGES}
    await connection.close()
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, default=ROOT / "pretrained")
    parser.add_argument("--repeats", type=int, default=2, help="rounds over the pages; the last one is reported")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as runs_dir, serve(args.models_dir, runs_dir) as server:
        counts = asyncio.run(walk(server.url, max(1, args.repeats)))
    for page, (n, size, kinds) in counts.items():
        print(f"{page:13s} {n:4d} messages {size / 1024:7.1f} KB  {kinds}")


if __name__ == "__main__":
    main()
