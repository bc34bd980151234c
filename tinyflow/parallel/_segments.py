"""Splitting a flat buffer into per-rank chunks and pipelined segments (shared by algorithms)."""
from __future__ import annotations

from typing import Any

from tinyflow.device import kernels_of

DEFAULT_SEGMENT_BYTES = 4 * 1024 * 1024


def chunk_bounds(length: int, parts: int) -> list[tuple[int, int]]:
    """Split ``length`` elements into ``parts`` contiguous chunks as evenly as possible.

    The first ``length % parts`` chunks get one element more; chunks may be empty when the
    buffer is shorter than the number of parts.
    """
    base, extra = divmod(length, parts)
    bounds = []
    start = 0
    for i in range(parts):
        stop = start + base + (1 if i < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def segment_bounds(start: int, stop: int, segment: int) -> list[tuple[int, int]]:
    """Cut ``[start, stop)`` into pieces of at most ``segment`` elements (none if empty)."""
    return [(a, min(a + segment, stop)) for a in range(start, stop, segment)]


def segment_elements(buf: Any, segment_bytes: int | None) -> int:
    """How many elements of ``buf``'s dtype make one segment (at least 1)."""
    nbytes = DEFAULT_SEGMENT_BYTES if segment_bytes is None else int(segment_bytes)
    return max(1, nbytes // buf.dtype.itemsize)


def exchange(
    comm: Any,
    flat: Any,
    send: tuple[int, int],
    dest: int,
    recv: tuple[int, int],
    source: int,
    tmps: tuple[Any, Any],
    segment: int,
    tag: int,
    reduce: bool,
) -> None:
    """Send ``flat[send]`` to ``dest`` while receiving ``flat[recv]`` from ``source``, pipelined.

    Both ranges travel segment by segment. Segment k+1's exchange is started before segment k
    is finished, so adding segment k into ``flat[recv]`` (``reduce``; received through the two
    ``tmps`` buffers in turn) overlaps with segment k+1 in flight. Without ``reduce`` data lands
    in ``flat[recv]`` directly. Sender and receiver cut the same chunk the same way, so their
    segment counts agree; when the two chunks differ in length by one element, the last
    segment may go one way only, and is then sent or received on its own.
    """
    out = segment_bounds(*send, segment)
    inc = segment_bounds(*recv, segment)
    count = max(len(out), len(inc))

    def target(k: int) -> Any:
        a, b = inc[k]
        return tmps[k % 2][: b - a] if reduce else flat[a:b]

    def start(k: int) -> Any:
        if k < len(out) and k < len(inc):
            a, b = out[k]
            return comm.start_sendrecv(flat[a:b], dest, target(k), source, tag)
        return None  # a one-way last segment: done blocking when its turn comes

    pending = start(0) if count else None
    for k in range(count):
        following = start(k + 1) if k + 1 < count else None
        if pending is not None:
            pending.wait()
        elif k < len(out):
            comm.send(flat[out[k][0] : out[k][1]], dest, tag)
        else:
            comm.recv(target(k), source, tag)
        if reduce and k < len(inc):
            a, b = inc[k]
            kernels_of(flat).reduce_add(flat[a:b], target(k))  # on a GPU: a device kernel, no host copy
        pending = following
