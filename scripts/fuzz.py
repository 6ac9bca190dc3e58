"""Fuzz ``model_runtime.simulate``: random meshes and parameter sets, valid and invalid, through the shipped model.

    .venv/bin/python scripts/fuzz.py --count 1000 --seed 0

Every case ends in one of: a result (checked: shape, all finite, frame 0 == rest, pinned vertices held), a clean
refusal (a NeuROKError, counted by its message), or a failure: a crash (any other exception), a non-finite output
or a result that breaks a check. The run exits non-zero on any failure and prints how to replay it
(``--only INDEX`` with the same seed). tests/test_robustness.py checks the same property on fewer cases.
"""

import argparse
import collections
import math
import re
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from model_runtime.errors import NeuROKError  # noqa: E402
from model_runtime.materials import MATERIALS  # noqa: E402
from model_runtime.mesh import bbox_diagonal  # noqa: E402
from model_runtime.params import make_params  # noqa: E402

MESH_KINDS = ("grid", "box", "soup", "parts", "zero_area", "duplicates", "loose", "needle", "single", "empty",
              "nan", "collinear", "bad_index")


# Meshes -------------------------------------------------------------------------------------------------------------

def grid(nx: int, ny: int, rng: np.random.Generator, bumpy: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.meshgrid(np.linspace(0, 1, nx), np.linspace(0, ny / nx, ny))
    z = bumpy * rng.standard_normal(x.shape) / nx
    v = np.stack([x.ravel(), y.ravel(), z.ravel()], 1)
    idx = np.arange(nx * ny).reshape(ny, nx)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel()
    return v, np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)])


def box(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Closed box surface with n x n quads per side (vertices shared along edges)."""
    u = np.linspace(-0.5, 0.5, n + 1)
    verts: dict[tuple, int] = {}
    faces = []

    def vid(p):
        key = tuple(np.round(p, 9))
        return verts.setdefault(key, len(verts))

    for axis in range(3):
        for sign in (-0.5, 0.5):
            for i in range(n):
                for j in range(n):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = np.zeros(3)
                        p[axis] = sign
                        p[(axis + 1) % 3], p[(axis + 2) % 3] = u[i + di], u[j + dj]
                        quad.append(vid(p))
                    if sign < 0:
                        quad = quad[::-1]
                    faces += [[quad[0], quad[1], quad[2]], [quad[0], quad[2], quad[3]]]
    v = np.array(list(verts), np.float64)
    return v, np.array(faces, np.int64)


def soup(n_tris: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Unconnected random triangles: non-manifold, self-intersecting, arbitrary."""
    v = rng.random((3 * n_tris, 3))
    return v, np.arange(3 * n_tris).reshape(-1, 3)


def random_mesh(rng: np.random.Generator, kind: str | None = None, max_vertices: int = 3000):
    """(vertices, faces, kind) of a random or degenerate mesh, randomly rotated, scaled (1e-4..1e3 m) and moved."""
    kind = kind or str(rng.choice(MESH_KINDS))
    side = int(rng.integers(2, max(3, int(math.sqrt(max_vertices)))))
    if kind == "grid":
        v, f = grid(side, int(rng.integers(2, side + 1)), rng, bumpy=float(rng.random()))
    elif kind == "box":
        v, f = box(int(rng.integers(1, max(2, int(math.sqrt(max_vertices / 6))))))
    elif kind == "soup":
        v, f = soup(int(rng.integers(1, max_vertices // 3)), rng)
    elif kind == "parts":  # several disconnected pieces, open and closed
        pieces = [grid(int(rng.integers(2, 8)), int(rng.integers(2, 8)), rng) if rng.random() < 0.5
                  else box(int(rng.integers(1, 4))) for _ in range(int(rng.integers(2, 5)))]
        vs, fs, offset = [], [], 0
        for i, (pv, pf) in enumerate(pieces):
            vs.append(pv + [2.0 * i, rng.random(), rng.random()])
            fs.append(pf + offset)
            offset += len(pv)
        v, f = np.concatenate(vs), np.concatenate(fs)
    elif kind == "zero_area":  # good faces plus zero-area ones (repeated index, collinear)
        v, f = grid(side, side, rng)
        k = int(rng.integers(1, len(f) + 1))
        bad = np.stack([f[:k, 0], f[:k, 0], f[:k, 1]], 1)
        v = np.concatenate([v, (v[f[:k, 0]] + v[f[:k, 1]]) / 2])
        mid = np.stack([f[:k, 0], f[:k, 1], len(v) - k + np.arange(k)], 1)
        f = np.concatenate([f, bad, mid])
    elif kind == "duplicates":  # every vertex twice, faces split between copies (an unwelded mesh)
        v, f = grid(side, side, rng)
        n = len(v)
        v = np.concatenate([v, v])
        f = np.where(rng.random(f.shape) < 0.5, f, f + n)
    elif kind == "loose":  # loose vertices and edges far from the faces
        v, f = grid(side, side, rng)
        v = np.concatenate([v, rng.normal(0, 3, (int(rng.integers(1, 50)), 3))])
    elif kind == "needle":  # very thin sliver triangles
        v, f = grid(side, 2, rng)
        v[:, 1] *= 10.0 ** rng.uniform(-9, -3)
    elif kind == "single":
        v, f = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0.0]]), np.array([[0, 1, 2]])
    elif kind == "empty":
        v, f = np.zeros((int(rng.integers(0, 3)), 3)), np.zeros((0, 3), np.int64)
    elif kind == "nan":
        v, f = grid(side, side, rng)
        v[int(rng.integers(len(v))), int(rng.integers(3))] = rng.choice([np.nan, np.inf, -np.inf])
    elif kind == "collinear":
        t = rng.random(side)
        v, f = np.stack([t, 2 * t, 3 * t], 1), np.array([[0, 1, 2]] * (side - 2)) + np.arange(side - 2)[:, None]
    elif kind == "bad_index":
        v, f = grid(side, side, rng)
        f = f.copy()
        f[int(rng.integers(len(f))), 0] = rng.choice([-1, len(v)])
    else:
        raise ValueError(kind)
    if len(v):
        v = np.where(np.isfinite(v), v, 0.0) if kind != "nan" else v
        q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        scale = 10.0 ** rng.uniform(-4, 3)
        v = (v - v.mean(0)) @ q.T * scale + rng.normal(0, 3 * scale, 3)
    return v, f, kind


# Parameters ---------------------------------------------------------------------------------------------------------

INVALID = {
    "negative density": {"density": -1000.0},
    "zero frames": {"frames": 0},
    "fractional frames": {"frames": 2.5},
    "absurd gravity": {"gravity": (0.0, 0.0, -1e5)},
    "nan gravity": {"gravity": (0.0, float("nan"), -9.81)},
    "inf velocity": {"initial_velocity": (float("inf"), 0.0, 0.0)},
    "short vector": {"angular_velocity": (1.0, 2.0)},
    "zero stiffness": {"stiffness": 0.0},
    "poisson 0.5": {"poisson": 0.5},
    "negative drag": {"drag": -1.0},
    "huge damping": {"damping": 1e6},
    "zero fps": {"fps": 0.0},
    "nan ground": {"ground": float("nan")},
    "string density": {"density": "heavy"},
    "unknown material": {"material": "unobtainium"},
    "all pinned": {"pins": "all"},
    "pin out of range": {"pins": "out"},
    "negative pin": {"pins": [-1]},
    "fractional pins": {"pins": [0.5]},
}


def random_params(rng: np.random.Generator, vertices: np.ndarray, invalid: str | None = None) -> dict:
    """simulate() keyword arguments; physically valid unless ``invalid`` names an entry of INVALID."""
    n = len(vertices)
    p: dict = {"frames": int(rng.integers(4, 13)), "fps": float(rng.choice([12.0, 24.0, 30.0, 60.0]))}
    if rng.random() < 0.6:
        p["material"] = str(rng.choice(list(MATERIALS)))
    g = rng.normal(size=3)
    p["gravity"] = tuple(float(x) for x in g / np.linalg.norm(g) * rng.choice([0.0, 9.81, rng.uniform(0, 200)]))
    if rng.random() < 0.3:
        p["drag"] = float(rng.uniform(0, 20))
    if rng.random() < 0.4:
        p["stiffness"] = float(10.0 ** rng.uniform(0, 11))
    if rng.random() < 0.4:
        p["density"] = float(10.0 ** rng.uniform(0, math.log10(25_000)))
    if rng.random() < 0.3:
        p["damping"] = float(rng.choice([0.0, 10.0 ** rng.uniform(-4, 1)]))
    if rng.random() < 0.2:
        p["poisson"] = float(rng.uniform(0, 0.499))
    if rng.random() < 0.2:
        p["thickness"] = float(10.0 ** rng.uniform(-5, 0))
    if rng.random() < 0.3:
        p["initial_velocity"] = tuple(float(x) for x in rng.normal(0, 5, 3))
    if rng.random() < 0.3:
        p["angular_velocity"] = tuple(float(x) for x in rng.normal(0, 3, 3))
    finite = n and np.isfinite(vertices).all()
    if rng.random() < 0.2 and finite:
        lo, hi = vertices[:, 2].min(), vertices[:, 2].max()
        p["ground"] = float(lo - rng.uniform(-0.2, 1.0) * (hi - lo + 1e-9))
    if rng.random() < 0.4 and n > 1:
        frac = rng.choice([0.01, 0.1, 0.5, 0.9])
        if finite and rng.random() < 0.5:  # the lowest vertices, like a user's pin group
            pins = np.argsort(vertices[:, 2])[: max(1, int(frac * n))]
        else:
            pins = rng.choice(n, size=max(1, min(n - 1, int(frac * n))), replace=False)
        p["pins"] = pins if rng.random() < 0.8 else np.isin(np.arange(n), pins)  # indices or a mask
    if invalid is not None:
        change = dict(INVALID[invalid])
        if change.get("pins") == "all":
            change["pins"] = np.arange(n)
        elif change.get("pins") == "out":
            change["pins"] = [n + 5]
        p.update(change)
    return p


# Running and checking -----------------------------------------------------------------------------------------------

def refusal_key(exc: BaseException) -> str:
    """A refusal's type and message with the numbers taken out, to count kinds rather than instances."""
    text = re.sub(r"-?\d[\d.,e+\-]*", "#", str(exc))
    text = re.sub(r"'[^']*'", "'...'", text)
    return f"{type(exc).__name__}: {text[:90]}"


def check_result(out, vertices, params) -> str | None:
    """What is wrong with a simulation result, or None."""
    v = np.asarray(vertices, np.float64)
    frames = params.get("frames", 48)
    if not isinstance(out, np.ndarray) or out.shape != (frames + 1, len(v), 3):
        return f"shape {getattr(out, 'shape', None)} != {(frames + 1, len(v), 3)}"
    if not np.isfinite(out).all():
        return "non-finite positions"
    size = bbox_diagonal(v)
    tol = 1e-6 * (float(np.abs(v).max()) + size) + 1e-12
    if np.abs(out[0] - v).max() > tol:
        return f"frame 0 differs from the rest shape by {np.abs(out[0] - v).max():.3g}"
    pins = params.get("pins")
    if pins is not None and len(pins):
        pins = np.asarray(pins)
        pins = np.nonzero(pins)[0] if pins.dtype == bool else pins
        drift = float(np.abs(out[:, pins] - out[0, pins]).max())
        if drift > 10 * tol:
            return f"pinned vertices moved by {drift:.3g} (size {size:.3g})"
    return None


def load_strain(vertices, options: dict) -> float:
    """rho |g| L / E: the strain the body's own weight asks of it (L its bounding-box diagonal), to see whether
    failures on valid input come from strong loads (they did not: see the report)."""
    p = make_params(num_vertices=len(vertices), **options)
    size = bbox_diagonal(np.asarray(vertices, np.float64))
    return p.density * float(np.linalg.norm(p.gravity)) * size / p.stiffness


def run_case(simulator, vertices, faces, options: dict):
    """('result' | 'refused' | 'crash' | 'nonfinite' | 'check', detail) for one simulate call."""
    try:
        params = make_params(num_vertices=len(np.asarray(vertices)), **options)
        out = simulator.simulate(vertices, faces, params)
    except NeuROKError as exc:
        return "refused", refusal_key(exc)
    except Exception:  # noqa: BLE001 - anything else is the bug this script looks for
        return "crash", traceback.format_exc(limit=6)
    problem = check_result(out, vertices, options)
    if problem == "non-finite positions":
        return "nonfinite", problem
    return ("check", problem) if problem else ("result", "")


def make_case(seed: int, index: int, max_vertices: int = 3000):
    rng = np.random.default_rng([seed, index])
    v, f, kind = random_mesh(rng, max_vertices=max_vertices)
    invalid = str(rng.choice(list(INVALID))) if rng.random() < 0.25 else None
    return v, f, kind, invalid, random_params(rng, v, invalid)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first case index (to split a run)")
    ap.add_argument("--only", type=int, help="run just this case index (to replay a failure)")
    ap.add_argument("--max-vertices", type=int, default=3000)
    ap.add_argument("--verbose", action="store_true", help="print every case before running it")
    args = ap.parse_args(argv)

    from model_runtime.simulator import Simulator

    sim = Simulator()
    outcomes: collections.Counter = collections.Counter()
    refusals: collections.Counter = collections.Counter()
    kinds: collections.Counter = collections.Counter()
    failures = []
    failed_strains, passed_strains = [], []  # self-weight strain of valid cases that failed / succeeded to simulate
    indices = [args.only] if args.only is not None else range(args.start, args.start + args.count)
    start = time.monotonic()
    for done, i in enumerate(indices, 1):
        v, f, kind, invalid, options = make_case(args.seed, i, args.max_vertices)
        if args.verbose:
            print(f"case {i}: {kind}, {len(v)} vertices, {invalid or 'valid'} {options}", flush=True)
        t0 = time.monotonic()
        outcome, detail = run_case(sim, v, f, options)
        outcomes[outcome] += 1
        kinds[(kind, outcome)] += 1
        if invalid is None and outcome == "result":
            passed_strains.append(load_strain(v, options))
        elif invalid is None and detail.startswith("SimulationError"):
            failed_strains.append(load_strain(v, options))
        if outcome == "refused":
            refusals[detail] += 1
        elif outcome != "result":
            failures.append((i, kind, invalid, detail))
            print(f"case {i} ({kind}, {invalid or 'valid params'}, {len(v)} vertices): {outcome}: {detail}",
                  flush=True)
        if args.only is not None or done % 50 == 0:
            print(f"[{done}/{len(indices)}, case {i}] {dict(outcomes)} last {time.monotonic() - t0:.1f}s, "
                  f"total {time.monotonic() - start:.0f}s", flush=True)
    print(f"\n{len(indices)} cases in {time.monotonic() - start:.0f}s (seed {args.seed})")
    for name in ("result", "refused", "crash", "nonfinite", "check"):
        print(f"  {name:10s} {outcomes[name]}")
    print("refusals by message:")
    for key, n in refusals.most_common():
        print(f"  {n:5d}  {key}")
    if failed_strains:
        print(f"SimulationErrors on valid input: {len(failed_strains)}; self-weight strain rho |g| L / E, "
              "quartiles (0, 25, 50, 75, 100%):")
        for name, xs in (("failed", failed_strains), ("simulated", passed_strains)):
            if xs:
                print(f"  {name:10s} " + "  ".join(f"{q:.2g}" for q in np.percentile(xs, [0, 25, 50, 75, 100])))
    print("outcomes by mesh kind:")
    for kind in MESH_KINDS:
        row = {o: kinds[(kind, o)] for o in ("result", "refused", "crash", "nonfinite", "check") if kinds[(kind, o)]}
        print(f"  {kind:11s} {row}")
    if failures:
        print(f"{len(failures)} FAILURES; replay one with --seed {args.seed} --only INDEX")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
