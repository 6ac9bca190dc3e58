"""The reference's implicit time step (lab/data/implicit_fem.py): BDF2, backward Euler on the first step, each step a
minimization by Newton's method, to the tolerance the product's pinned solids (continuum_solid.py) use too."""

# Steps per simulated second at least (whole steps per frame). BDF2's numerical damping of a mode of angular
# frequency w grows as (w h)^4: see docs/physics-validation.md for what this rate costs per preset.
STEP_RATE = 96.0
NEWTON_TOLERANCE = 1e-4  # converged when no node moves by more than this fraction of a lattice edge in one iteration
RAYLEIGH_REFRESH = 0.01  # change of any F entry (strain or rotation, rad) after which Rayleigh's stiffness is retaken


def bdf2(x, v, x_prev, v_prev, h):
    """A BDF2 step's terms (backward Euler's when there is no previous state): tau^2 and alpha (the new velocity
    is alpha (x_new - x_p)), x_p, the inertial target x_hat, and where Newton starts."""
    if x_prev is None:
        return h * h, 1.0 / h, x, x + h * v, x + h * v
    xp = (4.0 * x - x_prev) / 3.0
    # Newton starts where the velocity's trend points (Adams-Bashforth 2), not at the inertial target
    x_hat = xp + 2.0 / 3.0 * h * (4.0 * v - v_prev) / 3.0
    return 4.0 / 9.0 * h * h, 1.5 / h, xp, x_hat, x + h * (1.5 * v - 0.5 * v_prev)
