"""A producer thread's hand-over to a bounded queue that its consumer may stop reading at any time."""

from __future__ import annotations

import queue
import threading
from typing import Any


def put_unless_stopped(q: queue.Queue, item: Any, stopping: threading.Event, poll: float = 0.1) -> bool:
    """Put `item` into `q`, waiting while it is full, unless `stopping` is set first (then False): a producer
    blocked on a full queue sees the consumer's `close()` within `poll` seconds instead of waiting forever."""
    while not stopping.is_set():
        try:
            q.put(item, timeout=poll)
            return True
        except queue.Full:
            continue
    return False
