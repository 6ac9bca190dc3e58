"""The Markdown report: tables of the reconstruction, rollout and physics results, and the plots beside it."""

import json
import os
from pathlib import Path

from .checks import SETTLE_DRAG


def _f(x, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float) and (abs(x) >= 1e4 or (0 < abs(x) < 10 ** -digits)):
        return f"{x:.2e}"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def markdown(r: dict, out_dir: Path | None = None) -> str:
    lines = ["# NeuROK evaluation", "", f"Weights: `{r['weights']}`" + (
        f" ({json.dumps(r['weights_info'])})" if r.get("weights_info") else ""), "",
        f"Total time {r['seconds']:.0f} s. Settings: `{json.dumps(r['settings'])}`.", ""]
    if "reconstruction" in r:
        rec = r["reconstruction"]
        lines += ["## Reconstruction (Chamfer-L1, unit-diagonal shapes; paper: 0.028, target <= 0.03)", "",
                  f"CD-L1 = {r['cd_definition']}. Clouds of {r['settings']['points']} surface samples; "
                  "`floor` = ground truth at independent samples (sampling noise), `rest` = undeformed.", "",
                  "| set | IK | posterior | prior mean | rest baseline | floor |", "|---|---|---|---|---|---|"]
        for name, s in [("all", rec["summary"]), *rec["by_family"].items()]:
            lines.append(f"| {name} | {_f(s['ik'])} | {_f(s['posterior'])} | {_f(s['prior_mean'])} | "
                         f"{_f(s['rest'])} | {_f(s['floor'])} |")
        lines.append("")
    for key, title in (("test_rollouts", f"Rollout vs reference: {r['settings'].get('split', 'test')} split"),
                       ("mesh_rollouts", "Rollout vs reference: meshes")):
        if key not in r:
            continue
        block = r[key]
        lines += [f"## {title}", "", "Mean vertex error / rest bbox diagonal, averaged over frames 1..T and over "
                  "the first 2 s. Target: rest / model over 2 s >= 3.", "",
                  "| item | V | pinned | model | model 2 s | rest | rest 2 s | rigid | rigid 2 s | rest/model 2 s | "
                  "pin error | NeuROK s |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for it in block["items"]:
            if "error" in it:
                lines.append(f"| {it['name']} | {it['vertices']} | {_f(it['pinned'])} | failed: {it['error']} |"
                             + " |" * 8)
                continue
            label = it["name"] + (f" ({it['family']})" if "family" in it else "")
            lines.append(f"| {label} | {it['vertices']} | {_f(it['pinned'])} | {_f(it['model_error'])} | "
                         f"{_f(it['model_error_2s'])} | {_f(it['rest_error'])} | {_f(it['rest_error_2s'])} | "
                         f"{_f(it['rigid_error'])} | {_f(it['rigid_error_2s'])} | {it['rest_over_model_2s']:.2f} | "
                         f"{_f(it['pin_error'], 6)} | {it['simulate_seconds']:.1f} |")
        s = block["summary"]
        if s:
            lines.append(f"| **mean ({s['count']})** | | | {_f(s['model_error'])} | {_f(s['model_error_2s'])} | "
                         f"{_f(s['rest_error'])} | {_f(s['rest_error_2s'])} | {_f(s['rigid_error'])} | "
                         f"{_f(s['rigid_error_2s'])} | {s['rest_over_model_2s']:.2f} (median "
                         f"{s['median_rest_over_model_2s']:.2f}) | {_f(s['max_pin_error'], 6)} | |")
        lines.append("")
    if "physics" in r:
        lines += ["## Physics checks of the learned simulator", "",
                  "Energy drift: max |E(t) - E(0)| over 5 s with zero drag and damping, relative to the largest "
                  "kinetic energy (target <= 2%). Pin error: max pinned-vertex displacement / diagonal (target "
                  f"< 1e-4). Sag: downward vertex displacement over the last quarter of 2 s with drag "
                  f"{SETTLE_DRAG:g}/s (settled).", "",
                  "| body | energy drift | pin error | more drag -> less KE | more gravity -> more sag | "
                  "stiffer -> less sag |", "|---|---|---|---|---|---|"]
        for name, c in r["physics"].items():
            def fmt(block, key):
                vals = ", ".join(_f(x, 5) for x in block[key])
                return f"{_f(block['monotonic'])} ({vals})"

            lines.append(f"| {name} ({c['material']}, {c['vertices']} V) | {100 * c['energy_drift']:.2f}% | "
                         f"{_f(c['pin_error'], 6)} | {fmt(c['drag'], 'mean_kinetic_J')} | "
                         f"{fmt(c['gravity'], 'sag_m')} | {fmt(c['stiffness'], 'sag_m')} |")
        lines.append("")
    plots = sorted(p for p in os.listdir(out_dir) if p.endswith(".png")) if out_dir else []
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(lines)
