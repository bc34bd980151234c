"""Splitting a flat buffer into per-rank chunks and pipelined segments (shared by algorithms)."""
from __future__ import annotations

from typing import Any

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
    tmp: Any,
    segment: int,
    tag: int,
    reduce: bool,
) -> None:
    """Send ``flat[send]`` to ``dest`` while receiving ``flat[recv]`` from ``source``.

    Both ranges travel segment by segment; with ``reduce`` the received data is added into
    ``flat[recv]`` (through ``tmp``), otherwise it overwrites it. Sender and receiver cut the
    same chunk the same way, so their segment counts always agree.
    """
    out = segment_bounds(*send, segment)
    inc = segment_bounds(*recv, segment)
    for k in range(max(len(out), len(inc))):
        s = out[k] if k < len(out) else None
        r = inc[k] if k < len(inc) else None
        target = None
        if r is not None:
            target = tmp[: r[1] - r[0]] if reduce else flat[r[0] : r[1]]
        if s is not None and r is not None:
            comm.sendrecv(flat[s[0] : s[1]], dest, target, source, tag)
        elif s is not None:
            comm.send(flat[s[0] : s[1]], dest, tag)
        elif r is not None:
            comm.recv(target, source, tag)
        if reduce and r is not None:
            flat[r[0] : r[1]] += target
