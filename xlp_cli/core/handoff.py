"""A producer thread's hand-over to a bounded queue that its consumer may stop reading at any time (and `Blocks`:
byte blocks and an error handed to one reader)."""

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


class Blocks:
    """The bounded hand-over of a producer thread that makes byte blocks for one reader: `put(data)` and
    `put(b"", error)` on the producer's side (False once the reader stopped it), `take()` on the reader's: the next
    block, b"" at the end, the producer's error raised where it came. Used by the Wikipedia reader's
    decompression threads (prepare/sources/_files.ReadAhead, prepare/sources/bz2_blocks.ParallelBz2)."""

    def __init__(self, depth: int):
        self.queue: queue.Queue = queue.Queue(depth)
        self.stopping = threading.Event()
        self.ended = False

    def put(self, data: bytes, error: BaseException | None = None) -> bool:
        return put_unless_stopped(self.queue, (data, error), self.stopping)

    def take(self) -> bytes:
        if self.ended:
            return b""
        data, error = self.queue.get()
        if error is not None:
            self.ended = True
            raise error
        if not data:
            self.ended = True
        return data

    def stop(self) -> None:
        """The reader is done: the producer's next `put` (or the one it waits in, within its poll) returns False."""
        self.stopping.set()
        self.ended = True
