"""The reconstruction metric: how closely the decoder reaches a stored frame, its latent found by inverse kinematics
and by the posterior encoder, in Chamfer-L1 on unit-diagonal shapes."""

import numpy as np
import torch

from ..train import prepare, sample_points
from .metrics import chamfer_l1


def reconstruct_sequence(model, seq: dict, frames: int, points: int, ik_steps: int, rng: np.random.Generator,
                         ik_lr: float = 0.05) -> list[dict]:
    """CD-L1 of IK and posterior reconstructions for `frames` evenly spaced frames of one sequence."""
    shape = prepare(seq)
    T = len(shape.disp)
    picks = np.unique(np.linspace(0, T - 1, frames).round().astype(int))
    enc, evl, tgt = ([sample_points(shape, int(f), points, rng) for f in picks] for _ in range(3))

    def stack(samples, k):
        return torch.as_tensor(np.stack([s[k] for s in samples]), dtype=torch.float32)

    with torch.no_grad():
        tokens, mu_cond, code = model.prior(stack(enc, 0), stack(enc, 1))
        mu_post, _ = model.posterior(stack(enc, 0), stack(enc, 1), stack(enc, 2), tokens)
        phi_fit = model.decoder.basis(stack(enc, 0), stack(enc, 1), tokens)
        phi_eval = model.decoder.basis(stack(evl, 0), stack(evl, 1), tokens)
    target_fit = stack(enc, 2)
    z = mu_cond.clone().requires_grad_(True)
    opt = torch.optim.Adam([z], lr=ik_lr)
    for _ in range(ik_steps):
        pred = torch.einsum("bnip,bp->bni", phi_fit, model.decoder.coefficients(z, code))
        loss = ((pred - target_fit) ** 2).sum((1, 2)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = []
    with torch.no_grad():
        decode = {name: torch.einsum("bnip,bp->bni", phi_eval, model.decoder.coefficients(zz, code)).numpy()
                  for name, zz in (("ik", z.detach()), ("posterior", mu_post), ("prior_mean", mu_cond))}
    for i, f in enumerate(picks):
        x_eval, _, d_eval, _ = evl[i]  # sample_points also gives each sample's face
        target = tgt[i][0] + tgt[i][2]
        row = {"frame": int(f) + 1, "displacement": float(np.linalg.norm(d_eval, axis=1).mean()),
               "rest": chamfer_l1(x_eval, target), "floor": chamfer_l1(x_eval + d_eval, target)}
        for name, d in decode.items():
            row[name] = chamfer_l1(x_eval + d[i], target)
        out.append(row)
    return out
