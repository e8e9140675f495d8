"""A small HTTP load generator, run in its own process by bench_serve.py (so that it does not share the
server's interpreter): ``python -m benchmarks.loadgen URL PATH CLIENTS REQUESTS [--auth TOKEN]`` sends
CLIENTS concurrent keep-alive clients REQUESTS GETs each and prints one JSON line: requests/s, median
and 99th-percentile latency (seconds), errors. ``--events N`` instead opens N ``/v2/events`` streams at
once, reads each one's first event, and closes them all."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import aiohttp


async def _load(url: str, path: str, clients: int, requests: int, headers: dict) -> dict:
    latencies: list[float] = []
    errors = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=headers) as session:
        async def client() -> None:
            nonlocal errors
            for _ in range(requests):
                t = time.perf_counter()
                try:
                    async with session.get(url + path) as r:
                        await r.read()
                        ok = r.status == 200
                except aiohttp.ClientError:
                    ok = False
                latencies.append(time.perf_counter() - t)
                errors += not ok

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        elapsed = time.perf_counter() - t0
    latencies.sort()
    return {"requests": len(latencies), "seconds": elapsed, "rps": len(latencies) / elapsed,
            "median": statistics.median(latencies), "p99": latencies[max(0, int(len(latencies) * 0.99) - 1)],
            "errors": errors}


async def _events(url: str, n: int, headers: dict) -> dict:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), headers=headers) as session:
        responses = []
        for _ in range(n):
            r = await session.get(url + "/v2/events", headers={"Accept": "text/event-stream"})
            responses.append(r)
        attached = 0
        for r in responses:
            line = await asyncio.wait_for(r.content.readline(), 30)
            attached += line.startswith(b"event: event_stream_attached")
        for r in responses:
            r.close()
    return {"streams": n, "attached": attached}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("path", nargs="?", default="/v2/apps")
    parser.add_argument("clients", nargs="?", type=int, default=50)
    parser.add_argument("requests", nargs="?", type=int, default=200)
    parser.add_argument("--events", type=int, default=0)
    parser.add_argument("--auth", default="")
    args = parser.parse_args()
    headers = {"Authorization": f"token={args.auth}"} if args.auth else {}
    if args.events:
        print(json.dumps(asyncio.run(_events(args.url, args.events, headers))))
    else:
        print(json.dumps(asyncio.run(_load(args.url, args.path, args.clients, args.requests, headers))))


if __name__ == "__main__":
    main()
