"""Run `hey` (Debian's HTTP load generator) and read its summary."""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class LoadResult:
    seconds: float = 0.0
    rps: float = 0.0
    p50: float = 0.0  # milliseconds
    p99: float = 0.0
    slowest: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    cpu_us: float = 0.0  # the server's CPU time per request, when measured

    @property
    def requests(self) -> int:
        return sum(self.statuses.values()) + self.failed_transport

    @property
    def non_200(self) -> int:
        return sum(n for code, n in self.statuses.items() if code != 200)

    @property
    def failed_transport(self) -> int:
        return sum(self.errors.values())


def start(url: str, body: Path, clients: int, seconds: float, rate_per_client: float = 0,
          *extra: str) -> subprocess.Popen:
    """Start hey: POST `body` from `clients` keep-alive connections for `seconds`."""
    command = ["hey", "-z", f"{seconds}s", "-c", str(clients), "-m", "POST",
               "-T", "application/json", "-D", str(body), *extra]
    if rate_per_client:
        command += ["-q", f"{rate_per_client:.2f}"]
    return subprocess.Popen([*command, url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(process: subprocess.Popen, timeout: float = 120) -> LoadResult:
    output, _ = process.communicate(timeout=timeout)
    return parse(output)


def run(url: str, body: Path, clients: int, seconds: float, rate_per_client: float = 0,
        *extra: str) -> LoadResult:
    return finish(start(url, body, clients, seconds, rate_per_client, *extra))


def parse(output: str) -> LoadResult:
    """Read hey's text summary; transport errors come from its error distribution."""
    result = LoadResult()

    def seconds(label: str) -> float:
        match = re.search(rf"{label}:\s+([\d.]+) secs", output)
        return float(match.group(1)) if match else 0.0

    result.seconds = seconds("Total")
    result.slowest = seconds("Slowest") * 1000
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    result.rps = float(match.group(1)) if match else 0.0
    for percent, attribute in (("50", "p50"), ("99", "p99")):
        match = re.search(rf"\s{percent}% in ([\d.]+) secs", output)
        setattr(result, attribute, float(match.group(1)) * 1000 if match else 0.0)
    for code, count in re.findall(r"\[(\d{3})\]\s+(\d+) responses", output):
        result.statuses[int(code)] = int(count)
    errors = output.split("Error distribution:", 1)
    if len(errors) == 2:
        for count, message in re.findall(r"\[(\d+)\]\s+(.+)", errors[1]):
            result.errors[message.strip()] = int(count)
    return result


def staggered(url: str, body: Path, clients: int, seconds: float, rate: float) -> LoadResult:
    """`rate` requests/s from `clients` keep-alive clients whose ticks are spread evenly.

    hey's own paced clients (`-c N -q R`) tick together: every 1/R s all N send at once,
    a burst no set of independent callers (the API server's) makes. Here each client is
    its own hey (`-c 1`), started 1/(R*N) s after the previous one; percentiles come from
    every request's latency (hey's CSV output), not from the clients' summaries.
    """
    per_client = rate / clients
    processes = []
    for _ in range(clients):
        processes.append(start(url, body, 1, seconds, per_client, "-o", "csv"))
        time.sleep(1 / rate)
    latencies: list[float] = []
    result = LoadResult(seconds=seconds)
    for process in processes:
        output, _ = process.communicate(timeout=seconds + 60)
        for line in output.splitlines()[1:]:
            fields = line.split(",")
            if len(fields) < 8 or not fields[6].isdigit():
                result.errors[line[:80]] = result.errors.get(line[:80], 0) + 1
                continue
            latencies.append(float(fields[0]) * 1000)
            code = int(fields[6])
            result.statuses[code] = result.statuses.get(code, 0) + 1
    latencies.sort()
    if latencies:
        result.p50 = latencies[len(latencies) // 2]
        result.p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))]
        result.slowest = latencies[-1]
    result.rps = len(latencies) / seconds
    return result
