"""A network slower than this machine's, emulated on each non-local connection.

Every message of a connection crosses its own emulated link in order: it starts when both
the message is sent and the link is free, takes volume / bandwidth, and is seen by the
consumer ``latency`` later. The receiver applies it (both ends share CLOCK_MONOTONIC on one
machine). What is not emulated: links shared by several connections of one node (each
connection has the full bandwidth), and the CPU cost of a real network stack.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Link:
    """One connection's emulated link; ``bandwidth`` MB/s (None: local, instant), ``latency``
    ms; times in seconds."""

    bandwidth: float | None
    latency: float
    volume: float
    free_at: float = 0.0

    def visible_at(self, sent_at: float) -> float:
        """When a message sent at ``sent_at`` reaches the consumer (call once per message,
        in sending order)."""
        if self.bandwidth is None:
            return sent_at
        done = max(sent_at, self.free_at) + self.volume / self.bandwidth
        self.free_at = done
        return done + self.latency * 1e-3
