"""A tiny JSON-lines protocol between the benchmark driver and a filter worker process.

Each worker (Ironic's filter in the baseline venv, ours in the project venv) reads one
command per line on stdin and answers one JSON object per line on a private copy of stdout,
so library output (logging, warnings) can never corrupt the answers.
"""

import cProfile
import io
import json
import os
import pstats
import sys
import time
from collections.abc import Callable


def peak_rss_kb() -> dict[str, int]:
    """VmHWM (peak) and VmRSS (current) of this process, in KiB."""
    result = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                result[key] = int(value.split()[0])
    return result


def serve(sync: Callable[[], object]) -> None:
    """Answer ``sync``/``rss``/``profile``/``quit`` commands until stdin closes."""
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # anything printed by libraries goes to stderr
    answers.write(json.dumps({"ready": True, **peak_rss_kb()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        command = request["cmd"]
        if command == "quit":
            break
        if command == "sync":
            start = time.perf_counter()
            detail = sync()
            answer = {"seconds": time.perf_counter() - start, "detail": str(detail)}
        elif command == "profile":
            profiler = cProfile.Profile()
            start = time.perf_counter()
            profiler.runcall(sync)
            seconds = time.perf_counter() - start
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
            answer = {"seconds": seconds, "profile": out.getvalue()}
        elif command == "rss":
            answer = peak_rss_kb()
        else:
            answer = {"error": f"unknown command {command!r}"}
        answers.write(json.dumps(answer) + "\n")
