"""PC2 point caches, the format Blender's Mesh Cache modifier plays back.

Layout (little-endian): header ``<12siiffi`` = signature b"POINTCACHE2\\0", file version 1, vertex count, start
frame, sample rate (frames between samples) and sample count, then float32 xyz of every vertex of every sample.
"""

import struct

import numpy as np

HEADER = struct.Struct("<12siiffi")
SIGNATURE = b"POINTCACHE2\0"


def write_pc2(path: str, positions: np.ndarray, start: float, rate: float = 1.0) -> None:
    """Write ``positions`` (samples, V, 3) to ``path``."""
    samples, count, _ = positions.shape
    with open(path, "wb") as f:
        f.write(HEADER.pack(SIGNATURE, 1, count, float(start), float(rate), samples))
        f.write(np.ascontiguousarray(positions, dtype="<f4").tobytes())
