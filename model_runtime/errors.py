"""Errors the runtime raises on purpose; each message is written for the person who pressed Simulate."""

SMALL_OBJECT = 0.02  # m across: failures of smaller bodies explain the size (see size_hint)


class NeuROKError(Exception):
    """Base class: an expected failure with a message fit to show an artist."""


class MeshError(NeuROKError, ValueError):
    """The mesh cannot be simulated (empty, degenerate, NaN coordinates, too large...)."""


class ParameterError(NeuROKError, ValueError):
    """A physical parameter is out of range."""


class WeightsError(NeuROKError):
    """The model weights are missing, truncated, corrupt or do not match their config."""


class SimulationError(NeuROKError):
    """The simulation diverged or produced non-finite positions; nothing was written."""


class Cancelled(NeuROKError):
    """The user cancelled the simulation."""


def size_hint(across: float) -> str:
    """What to tell the user when an object ``across`` m wide fails. In the fuzz of valid input (seed 0, cases
    0-425), 19 of the 25 failures were bodies under 2 cm across (a 0.2 mm sheet swings on its pins with a period of
    ~20 ms, faster than any frame rate); the likely cause is a scene modelled in the wrong unit, not a wish to
    simulate a crumb."""
    if across >= SMALL_OBJECT:
        return ""
    return (f". The object is only {across * 1000:.2g} mm across: NeuROK works in real units "
            "(1 unit = 1 m), and at this size it moves faster than the frames can follow; scale "
            "the object up if it is meant to be larger, or raise the frame rate")
