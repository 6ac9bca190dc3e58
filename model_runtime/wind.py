"""Wind: a steady push along a direction, with gusts that vary in time and across the body.

Each source is an acceleration (m/s^2) of the body's mass along its direction, like gravity, scaled by
1 + noise * xi(t, x), where xi is a smooth gust field in [-1, 1]: a few travelling waves of GUST_LENGTH and
GUST_PERIODS with fixed phases, so the same settings always give the same motion and a sheet flutters instead of
only leaning. Directions are in gravity's axes: on an animated object (frame_motion) both turn into object space
as it turns, and the gusts are laid out over the object.
"""

import numpy as np

from .errors import ParameterError

GUST_LENGTH = 0.7  # m: wavelength of the gusts across the body
GUST_PERIODS = np.array([0.9, 0.37, 0.23])  # s: three incommensurate gust periods
MAX_WIND = 1000.0  # m/s^2, like gravity's bound


class Wind:
    """Sources of (acceleration (3,), noise) as functions of time and position."""

    def __init__(self, sources: list[tuple[np.ndarray, float]]):
        self.sources = sources
        rng = np.random.default_rng(0)
        self.phases = rng.uniform(0, 2 * np.pi, len(GUST_PERIODS))
        directions = rng.normal(size=(len(GUST_PERIODS), 3))
        self.wavevectors = 2 * np.pi / GUST_LENGTH * directions / np.linalg.norm(directions, axis=1, keepdims=True)

    def acceleration(self, t: float, x: np.ndarray) -> np.ndarray:
        """(N, 3) acceleration at points x (N, 3) at time t."""
        gust = np.sin(x @ self.wavevectors.T + 2 * np.pi * t / GUST_PERIODS + self.phases).mean(1)  # (N,)
        return sum((1.0 + noise * gust)[:, None] * push for push, noise in self.sources)


def make_wind(specs) -> Wind | None:
    """A validated Wind from plain data (JSON): a list of {"acceleration": [ax, ay, az] m/s^2, "noise": >= 0}."""
    if not specs:
        return None
    if not isinstance(specs, (list, tuple)):
        raise ParameterError(f"wind must be a list of wind sources, got {type(specs).__name__}")
    sources = []
    for i, spec in enumerate(specs):
        try:
            push = np.asarray(spec["acceleration"], dtype=float)
            noise = float(spec.get("noise", 0.0))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ParameterError(f"wind source {i} needs 'acceleration' (3 numbers, m/s^2) and an optional "
                                 f"'noise' (a number >= 0), got {spec!r:.80}") from exc
        if push.shape != (3,) or not np.isfinite(push).all() or np.linalg.norm(push) > MAX_WIND:
            raise ParameterError(f"wind source {i}: acceleration must be 3 finite numbers of at most "
                                 f"{MAX_WIND:.0f} m/s^2")
        if not 0.0 <= noise <= 10.0:
            raise ParameterError(f"wind source {i}: noise must be between 0 and 10, got {noise}")
        sources.append((push, noise))
    return Wind(sources)
