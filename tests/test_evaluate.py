"""``python -m model_runtime evaluate``: the evaluation code itself (metrics, report files), not model quality.

Runs on a tiny synthetic dataset and a tiny randomly initialised model written into tmp_path.
"""

import json

import numpy as np
import pytest
import torch

from model_runtime.lab.cli import main
from model_runtime.lab.data import shapes
from model_runtime.lab.data.format import save_sequence
from model_runtime.lab.evaluate.checks import check_body
from model_runtime.lab.evaluate.metrics import chamfer_l1, rigid_fall, rollout_metrics
from model_runtime.lab.evaluate.rollouts import MESH_DIAGONAL, default_pins, normalize_mesh
from model_runtime.lab.model import ModelConfig, NeuROK
from model_runtime.lab.weights import save_model
from model_runtime.mesh import Mesh, bbox_diagonal, write_obj
from model_runtime.params import make_params

TINY = ModelConfig(d_model=16, n_heads=2, n_shape_tokens=8, n_posterior_tokens=4, encoder_self_layers=1,
                   decoder_layers=1, n_freqs=2, latent_dim=4, n_basis=8, code_dim=4, coeff_hidden=16)


@pytest.fixture(scope="module")
def tiny_weights(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "tiny.safetensors"
    save_model(NeuROK(TINY), path, {"steps": 0})
    return path


def _params_json(**kw) -> dict:
    p = make_params(frames=6, fps=24.0, material="cloth", **kw)
    d = p.to_dict()
    d.pop("pins")
    return {**d, "variant": "synthetic"}


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    v, f = shapes.grid_sheet(6, 4, 0.5, 0.3)
    pin = v[:, 0] <= v[:, 0].min() + 1e-9
    t = np.arange(7)[:, None, None] / 24.0
    sag = -0.2 * ((v[:, 0] - v[:, 0].min()) / 0.5)[None, :, None] * np.array([0, 0, 1.0]) * np.minimum(t * 8, 1)
    save_sequence(str(root / "seq_000000.npz"), v, f, v[None] + sag, 24.0, pin, _params_json(), "cloth", "c0",
                  split="test")
    bv, bf = shapes.box_surface((3, 2, 2), (0.3, 0.2, 0.2))
    g = np.array([0.0, 0.0, -9.81])
    fall = bv[None] + 0.5 * t**2 * g  # exact rigid free fall: the rigid baseline is exact
    save_sequence(str(root / "seq_000001.npz"), bv, bf, fall, 24.0, np.zeros(len(bv), bool),
                  _params_json(), "soft", "s0", split="test")
    save_sequence(str(root / "seq_000002.npz"), v, f, v[None] + sag, 24.0, pin, _params_json(), "cloth", "c1",
                  split="train")
    return root


def test_chamfer_known_values():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 3))
    assert chamfer_l1(a, a) == 0.0
    assert chamfer_l1(np.zeros((1, 3)), np.array([[3.0, 4.0, 0.0]])) == pytest.approx(5.0)
    # Asymmetric case: P = {0}, Q = {0, 1 on x}: P->Q mean 0, Q->P mean 0.5, so CD = 0.25.
    assert chamfer_l1(np.zeros((1, 3)), np.array([[0.0, 0, 0], [1.0, 0, 0]])) == pytest.approx(0.25)


def test_rollout_metrics_known_answers():
    v, _ = shapes.grid_sheet(5, 5, 1.0, 1.0)
    ref = np.repeat(v[None], 5, 0).astype(np.float64)
    ref[1:, :, 2] -= 0.1 * np.arange(1, 5)[:, None]  # frame k moved down by 0.1 k
    p = make_params(frames=4, fps=24.0, pins=[0], num_vertices=len(v))
    m = rollout_metrics(ref, ref, p)
    diag = bbox_diagonal(v)
    assert m["model_error"] == 0.0
    assert m["rest_error"] == pytest.approx(np.mean(0.1 * np.arange(1, 5)) / diag)
    assert m["rigid_error"] == pytest.approx(m["rest_error"])  # pinned: rigid baseline holds still
    assert m["pin_error"] == pytest.approx(0.4 / diag)


def test_rigid_fall_baseline_is_exact_for_free_fall():
    v, _ = shapes.box_surface((2, 2, 2), (0.2, 0.2, 0.2))
    p = make_params(frames=10, fps=24.0, gravity=(1.0, 0.0, -9.81), initial_velocity=(0.5, 0, 0),
                    num_vertices=len(v))
    t = np.arange(11)[:, None, None] / 24.0
    ref = v[None] + t * np.array([0.5, 0, 0]) + 0.5 * t**2 * np.array([1.0, 0, -9.81])
    m = rollout_metrics(ref, ref, p)
    assert m["rigid_error"] < 1e-12
    assert m["rest_error"] > 0.1


def test_rigid_fall_with_drag_matches_integration():
    v = np.zeros((1, 3))
    p = make_params(frames=24, fps=24.0, gravity=(0, 0, -9.81), drag=2.0, initial_velocity=(1.0, 0, 0),
                    num_vertices=3)
    x, vel, dt = np.zeros(3), np.array([1.0, 0, 0]), 1e-5
    for _ in range(int(round(1.0 / dt))):  # semi-implicit Euler of x'' = g - c x' to t = 1 s
        vel = vel + dt * (np.array([0, 0, -9.81]) - 2.0 * vel)
        x = x + dt * vel
    assert np.allclose(rigid_fall(v, p)[-1, 0], x, atol=1e-3)


def test_default_pins_and_normalization():
    v, f = shapes.grid_sheet(5, 5, 10.0, 10.0)  # flat in z = 0: pins along x instead
    m = normalize_mesh(Mesh(v * 100, f))
    assert bbox_diagonal(m.vertices) == pytest.approx(MESH_DIAGONAL)
    pins = default_pins(m)
    assert len(pins) == round(0.1 * len(v)) and np.allclose(m.vertices[pins, 0], m.vertices[:, 0].min())


def test_evaluate_end_to_end(tmp_path, tiny_weights, tiny_data):
    meshes = tmp_path / "meshes"
    meshes.mkdir()
    v, f = shapes.grid_sheet(5, 5, 2.0, 2.0)
    v[:, 2] = 0.3 * v[:, 1]  # tilted, so the lowest vertices are a row
    write_obj(str(meshes / "sheet.obj"), v, f)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 10.0 / s, "recon": 9.0 / s, "kl": 1.0, "lr": 1e-3,
                                       "time": s}) + "\n" for s in range(1, 30)))
    out = tmp_path / "report"
    rc = main(["evaluate", "--weights", str(tiny_weights), "--data", str(tiny_data), "--meshes", str(meshes),
               "--out", str(out), "--run", str(tmp_path), "--limit", "3", "--recon-frames", "2",
               "--points", "128", "--ik-steps", "5", "--mesh-frames", "4", "--no-physics"])
    assert rc == 0
    r = json.loads((out / "evaluate.json").read_text())
    assert r["test_rollouts"]["summary"]["count"] == 2  # only the test split
    rec = r["reconstruction"]["summary"]
    assert all(np.isfinite(rec[k]) and rec[k] >= 0 for k in ("ik", "posterior", "rest", "floor"))
    items = {it["name"]: it for it in r["test_rollouts"]["items"]}
    fall = items["seq_000001"]
    assert fall["rigid_error"] < 1e-6 < fall["rest_error"]
    sheet = items["seq_000000"]
    diag = bbox_diagonal(shapes.grid_sheet(6, 4, 0.5, 0.3)[0])
    assert sheet["pin_error"] < 1e-4
    # Rest baseline = mean displacement / diagonal of the stored sequence.
    from model_runtime.lab.data.format import load_sequence
    seq = load_sequence(str(tiny_data / "seq_000000.npz"))
    disp = np.linalg.norm(seq["positions"][1:] - seq["positions"][0], axis=-1).mean()
    assert sheet["rest_error"] == pytest.approx(disp / diag, rel=1e-5)
    mesh = r["mesh_rollouts"]["items"][0]
    assert "error" not in mesh and mesh["pinned"] and np.isfinite(mesh["model_error"])
    for name in ("evaluate.md", "loss_curves.png", "error_test.png", "error_meshes.png",
                 "filmstrip_seq_000000.png", "filmstrip_mesh_sheet.png"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "evaluate.md").read_text()
    assert "Chamfer-L1" in md and "| seq_000001 (soft)" in md


def test_physics_checks_run():
    from model_runtime.simulator import Simulator

    sim = Simulator()
    v, f = shapes.grid_sheet(6, 3, 0.5, 0.1)
    r = check_body(sim, v, f, "cloth", seconds=0.5, fps=24.0, check_seconds=0.25)
    assert np.isfinite(r["energy_drift"]) and r["pin_error"] < 1e-4
    assert len(r["energy_curve"]) == 13
    for key in ("drag", "gravity", "stiffness"):
        assert isinstance(r[key]["monotonic"], bool)


def test_evaluate_all_splits_of_a_dataset_the_weights_never_saw(tmp_path, tiny_weights, tiny_data):
    out = tmp_path / "report"
    rc = main(["evaluate", "--weights", str(tiny_weights), "--data", str(tiny_data), "--split", "all", "--out",
               str(out), "--recon-frames", "2", "--points", "128", "--ik-steps", "2", "--no-physics"])
    assert rc == 0
    r = json.loads((out / "evaluate.json").read_text())
    assert r["settings"]["split"] == "all"
    assert sorted(it["name"] for it in r["test_rollouts"]["items"]) == ["seq_000000", "seq_000001", "seq_000002"]
    assert "Rollout vs reference: all split" in (out / "evaluate.md").read_text()
