"""How many messages each page's script run sends the browser (prints figures; never a test).

    python bench/bench_messages.py [--models-dir pretrained] [--repeats 2]

Every message a run sends (an element's delta, a URL update, the run's status) goes through the server's event
loop, the thread that also answers /_stcore/health: under the load test (bench/bench_load.py) that loop is the
heartbeat's bottleneck, so fewer messages per run is less of its time. One server (``tests/devserver.py``) on the
folder's models, one websocket session (``load_sessions.rerun``) that walks the pages; the last round's count
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
sys.path.insert(0, str(ROOT / "bench"))
from devserver import serve  # noqa: E402
from load_sessions import connect_session, rerun  # noqa: E402

PAGES = ("model", "tokenization", "embeddings", "attention", "explain", "decoding")


async def walk(url: str, repeats: int) -> dict[str, tuple[int, int, dict[str, int]]]:
    """Page -> (messages, bytes, messages by kind) of the last of ``repeats`` rounds over ``PAGES``."""
    connection = await connect_session(url)
    hashes: dict[str, str] = {}

    async def run(page_hash: str = "") -> tuple[int, int, dict[str, int]]:
        kinds: collections.Counter[str] = collections.Counter()
        sizes: list[int] = []

        def seen(forward, data: bytes) -> None:
            kinds[forward.WhichOneof("type")] += 1
            sizes.append(len(data))

        await rerun(connection, hashes, page_hash, seen=seen)
        return len(sizes), sum(sizes), dict(kinds)

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
