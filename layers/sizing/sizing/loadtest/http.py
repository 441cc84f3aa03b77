"""A minimal HTTP/1.1 client for streamed responses, on plain sockets (cooperative under gevent's patching).

Why not the Locust clients: their buffered readers wait for a full buffer before returning, which shifts a
measured TTFT by up to ~100 ms (docs/serving-facts.md s8). Here every read is timestamped and the body
(Content-Length, chunked, or until close) is split into lines, so a token's arrival time is when its bytes arrived.
One `Connection` is one keep-alive socket; it is not shared between concurrent requests.

When its bytes arrived, not when the reading greenlet got its turn: on Linux, a plain-HTTP socket asks the kernel to
stamp every received segment (`SO_TIMESTAMPNS`, socket(7)), and a read's time is that stamp. Hundreds of streams
whose tokens land together are read one after the other, and the last of them would otherwise be late by the
whole batch's processing (the load generator's TTFT error p99 at 256 streams on one core: ~11 ms read-time
stamps, docs/loadgen.md). TLS sockets, other systems and injected clocks keep the read-time stamp.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

#: Bytes asked of one recv: large enough for a burst of SSE chunks, small enough to stay in L2.
RECV_BYTES = 65536
#: Largest response head we accept (servers send well under 1 KiB).
MAX_HEAD_BYTES = 64 * 1024
#: Linux's receive-timestamp option and its control message, a `struct timespec` of CLOCK_REALTIME
#: (include/uapi/asm-generic/socket.h: SO_TIMESTAMPNS_OLD = 35 = SCM_TIMESTAMPNS; not exported by Python's socket).
SO_TIMESTAMPNS = 35
TIMESPEC = struct.Struct("@qq")
ANCILLARY_BYTES = socket.CMSG_SPACE(TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
#: A kernel stamp further back than this from the read is not trusted (the wall clock stepped): the read's own time.
MAX_KERNEL_LAG_S = 60.0
#: Clocks that tick with the wall clock, so a kernel stamp converts into them exactly.
REAL_CLOCKS: tuple[Callable[[], float], ...] = (time.perf_counter, time.monotonic)


class HttpError(Exception):
    """A non-2xx response."""

    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status
        self.body = body


class ProtocolError(Exception):
    """The server's response is not valid HTTP/1.1."""


class Connection:
    """One keep-alive connection to `base_url` (http or https)."""

    def __init__(
        self, base_url: str, timeout_s: float = 600.0, clock: Callable[[], float] = time.perf_counter,
        *, read_timeouts: bool = True,
    ) -> None:  # fmt: skip
        """`timeout_s` bounds connecting and, with `read_timeouts`, every read. Under gevent a read timeout costs
        a timer per read; the load generator turns them off and bounds each whole request instead."""
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"not an http(s) URL: {base_url}")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.base_path = u.path.rstrip("/")
        self.timeout_s = timeout_s
        self.clock = clock
        self.read_timeouts = read_timeouts
        #: reads are stamped by the kernel (see the module's docstring); False where it cannot be
        self.kernel_stamps = (
            u.scheme == "http"
            and sys.platform.startswith("linux")
            and ANCILLARY_BYTES > 0
            and clock in REAL_CLOCKS
        )
        self._sock: socket.socket | None = None
        self._host_header = u.netloc

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.kernel_stamps:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            except OSError:  # a kernel without it (or a sandbox refusing it): read-time stamps
                self.kernel_stamps = False
        if not self.read_timeouts:
            sock.settimeout(None)
        if self.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        return sock

    def post_lines(
        self, path: str, body: bytes, headers: dict[str, str] | None = None
    ) -> Iterator[tuple[float, bytes]]:
        """POST `body` and yield (arrival time, line) for every line of the response body, without its line
        ending. Raises HttpError for a non-2xx status, OSError/TimeoutError for transport failures."""
        req_head = (
            f"POST {self.base_path}{path} HTTP/1.1\r\nHost: {self._host_header}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream, application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n"
        )
        for k, v in (headers or {}).items():
            req_head += f"{k}: {v}\r\n"
        data = req_head.encode() + b"\r\n" + body
        reused = self._sock is not None
        try:
            if self._sock is None:
                self._sock = self._connect()
            try:
                self._sock.sendall(data)
                t, first = self._recv()
            except OSError:
                if not reused:
                    raise
                t, first = self.clock(), b""
            if not first and reused:  # the server closed an idle keep-alive connection: retry once, fresh
                self.close()
                self._sock = self._connect()
                self._sock.sendall(data)
                t, first = self._recv()
            yield from self._read(t, first)
        except BaseException:
            self.close()
            raise

    def _recv(self) -> tuple[float, bytes]:
        """One read: (when its bytes arrived, on `clock`; the bytes)."""
        assert self._sock is not None
        if not self.kernel_stamps:
            chunk = self._sock.recv(RECV_BYTES)
            return self.clock(), chunk
        chunk, ancillary, _flags, _addr = self._sock.recvmsg(RECV_BYTES, ANCILLARY_BYTES)
        now, wall = self.clock(), time.time()
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(raw)
                lag = wall - (sec + nsec * 1e-9)  # how long the bytes waited in the socket for this read
                if 0.0 <= lag <= MAX_KERNEL_LAG_S:
                    return now - lag, chunk
        return now, chunk

    def _head(self, t: float, first: bytes) -> tuple[float, int, dict[str, str], bytes]:
        """Read the response head, `first` its first read (at `t`): when its last byte came, the status, the
        headers (lower-case names) and what of the body came with it."""
        buf = first
        while b"\r\n\r\n" not in buf:
            if len(buf) > MAX_HEAD_BYTES:
                raise ProtocolError("response head too long")
            t, more = self._recv()
            if not more:
                raise ProtocolError("connection closed before the response head")
            buf += more
        head, buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise ProtocolError(f"bad status line {lines[0]!r}") from None
        hdrs = {}
        for header in lines[1:]:
            k, _, v = header.partition(":")
            hdrs[k.strip().lower()] = v.strip()
        return t, status, hdrs, buf

    def _read(self, t: float, first: bytes) -> Iterator[tuple[float, bytes]]:
        t, status, hdrs, buf = self._head(t, first)
        keep = hdrs.get("connection", "").lower() != "close"
        chunked = "chunked" in hdrs.get("transfer-encoding", "").lower()
        if chunked:
            body_iter = self._chunked(t, buf)
        elif "content-length" in hdrs:
            body_iter = self._sized(t, buf, int(hdrs["content-length"]))
        else:
            keep = False
            body_iter = self._until_close(t, buf)
        if not 200 <= status < 300:
            raw = b"".join(piece for _, piece in body_iter)
            if not keep:
                self.close()
            raise HttpError(status, raw)
        yield from self._chunked_lines(t, buf) if chunked else self._lines(body_iter)
        if not keep:
            self.close()

    def _lines(self, body_iter: Iterator[tuple[float, bytes]]) -> Iterator[tuple[float, bytes]]:
        """The non-empty lines of a body read in pieces, each with the time of the read that completed it."""
        pending = b""
        for at, piece in body_iter:
            pending += piece
            if b"\n" in pending:
                *complete, pending = pending.split(b"\n")
                for line in complete:
                    if line.strip():
                        yield at, line.rstrip(b"\r")
        if pending.strip():
            yield self.clock(), pending.rstrip(b"\r")

    def _chunked_lines(self, t: float, raw: bytes) -> Iterator[tuple[float, bytes]]:
        """Decode a chunked body and yield its non-empty lines, with the time of the read that completed each.
        One decoding pass per read (not a generator per layer): this is the load generator's per-token hot path."""
        pending = b""
        state = [
            0,
            0,
        ]  # data bytes of the current chunk still to come; bytes of the CRLF after it still to skip
        while True:
            pieces, raw, done = self._dechunk(raw, state)
            if pieces:
                pending += b"".join(pieces)
                if b"\n" in pending:
                    *complete, pending = pending.split(b"\n")
                    for line in complete:
                        if line and line != b"\r":
                            yield t, line.rstrip(b"\r")
            if done:
                if pending.strip():
                    yield t, pending.rstrip(b"\r")
                return
            t, more = self._recv()
            if not more:
                raise ProtocolError("connection closed inside a chunked body")
            raw += more

    def _dechunk(self, raw: bytes, state: list[int]) -> tuple[list[bytes], bytes, bool]:
        """The data pieces in `raw` (chunk framing removed), what is left of `raw` undecoded, and whether the
        last chunk was read; `state` carries the position inside a chunk from one read to the next."""
        pieces: list[bytes] = []
        remaining, crlf = state
        while raw:
            if remaining:
                piece = raw[:remaining]
                pieces.append(piece)
                remaining -= len(piece)
                raw = raw[len(piece) :]
                if not remaining:
                    crlf = 2
            elif crlf:
                skip = min(crlf, len(raw))
                raw = raw[skip:]
                crlf -= skip
            else:
                end = raw.find(b"\r\n")
                if end < 0:
                    break
                try:
                    size = int(raw[:end].split(b";", 1)[0], 16)
                except ValueError:
                    raise ProtocolError(f"bad chunk size {raw[:20]!r}") from None
                raw = raw[end + 2 :]
                if size == 0:  # the last chunk; its empty trailer line must be read too (keep-alive)
                    while b"\r\n" not in raw:
                        more = self._recv()[1]
                        if not more:
                            break
                        raw += more
                    state[:] = [0, 0]
                    return pieces, raw, True
                remaining = size
        state[:] = [remaining, crlf]
        return pieces, raw, False

    def _sized(self, t: float, buf: bytes, length: int) -> Iterator[tuple[float, bytes]]:
        got = len(buf)
        if buf:
            yield t, buf
        while got < length:
            t, more = self._recv()
            if not more:
                raise ProtocolError("connection closed inside the body")
            got += len(more)
            yield t, more

    def _until_close(self, t: float, buf: bytes) -> Iterator[tuple[float, bytes]]:
        if buf:
            yield t, buf
        while True:
            t, more = self._recv()
            if not more:
                return
            yield t, more

    def _chunked(self, t: float, buf: bytes) -> Iterator[tuple[float, bytes]]:
        while True:
            while b"\r\n" not in buf:
                t, more = self._recv()
                if not more:
                    raise ProtocolError("connection closed inside a chunk header")
                buf += more
            size_line, buf = buf.split(b"\r\n", 1)
            try:
                size = int(size_line.split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_line[:20]!r}") from None
            if size == 0:  # last chunk; skip the (empty) trailer
                while b"\r\n" not in buf:
                    t, more = self._recv()
                    if not more:
                        return
                    buf += more
                return
            while len(buf) < size + 2:
                if len(buf) > 0 and len(buf) <= size:
                    yield t, buf
                    size -= len(buf)
                    buf = b""
                t, more = self._recv()
                if not more:
                    raise ProtocolError("connection closed inside a chunk")
                buf += more
            yield t, buf[:size]
            buf = buf[size + 2 :]
