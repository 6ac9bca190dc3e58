"""A dependency-free terminal progress bar for the command line."""

import sys
import time


class ProgressBar:
    def __init__(self, label: str, stream=sys.stderr):
        self.label, self.stream, self.start, self._last = label, stream, time.monotonic(), -1.0

    def update(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last < 0.1 and fraction < 1.0:
            return
        self._last = now
        n = int(30 * min(max(fraction, 0.0), 1.0))
        self.stream.write(f"\r{self.label} [{'#' * n}{'.' * (30 - n)}] {100 * fraction:5.1f}% "
                          f"{now - self.start:6.1f}s {message[:40]:40s}")
        self.stream.flush()

    def close(self) -> None:
        self.update(1.0)
        self.stream.write("\n")
