"""Errors the runtime raises on purpose; each message is written for the person who pressed Simulate."""


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
