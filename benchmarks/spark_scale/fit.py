"""Curves, not points: each configuration's cost fitted as ``a + b·n`` over the sizes of a workload.

``a`` is the fixed part (per epoch, or per recovery: the driver's bookkeeping, job scheduling, a session
start), ``b·n`` the part proportional to the data (``n`` events per epoch or keys of state). The fit
weighs each point by ``1 / y`` (least squares on relative residuals): the sizes span 100× or more, and an
unweighted fit would be the largest size's alone. ``max_rel_residual`` says how well a line fits;
a cost that is not linear in ``n`` (a sort, a chain of deltas growing with the run) shows there.

>>> f = fit([10**4, 10**5, 10**6], [1.1, 2.0, 11.0])
>>> round(f["a"], 2), round(f["b"] * 1e6, 2), f["points"]
(1.0, 10.0, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the figures fitted, per configuration
METRICS = ("cpu_median_s", "cpu_mean_s", "wall_median_s", "driver_cpu_median_s", "bytes_per_epoch",
           "state_bytes_per_epoch", "kill_recovery_cpu_s", "kill_recovery_s", "fail_recovery_cpu_s",
           "fail_recovery_s", "peak_rss", "peak_rss_jvm")


def fit(ns: Sequence[float], ys: Sequence[float]) -> dict[str, Any]:
    """``y ≈ a + b·n`` by least squares on relative residuals (see the module docstring)."""
    import numpy as np

    n, y = np.asarray(ns, float), np.asarray(ys, float)
    keep = y > 0
    n, y = n[keep], y[keep]
    if len(y) < 2 or len(set(n.tolist())) < 2:
        return {"a": None, "b": None, "points": int(len(y))}
    m = np.stack([1 / y, n / y], axis=1)
    (a, b), *_ = np.linalg.lstsq(m, np.ones_like(y), rcond=None)
    pred = a + b * n
    return {"a": float(a), "b": float(b), "points": int(len(y)),
            "max_rel_residual": float(np.max(np.abs(pred - y) / y)),
            "fixed_share": {str(int(x)): float(a / (a + b * x)) if a + b * x else None for x in n}}


def fits(points: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """For each workload (and churn), configuration and metric of :data:`METRICS`: its fit over the sizes."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        key = p["workload"] + (f"-c{p['churn']:g}" if p.get("churn") is not None else "")
        groups.setdefault(key, []).append(p)
    out: dict[str, Any] = {}
    for key, ps in groups.items():
        ps = sorted(ps, key=lambda p: p["n"])
        configs = sorted({c for p in ps for c in p["summary"]})
        out[key] = {}
        for c in configs:
            rows = [(p["n"], p["summary"][c]) for p in ps if c in p["summary"]]
            out[key][c] = {m: fit([n for n, s in rows if s.get(m) is not None],
                                  [s[m] for _, s in rows if s.get(m) is not None]) for m in METRICS}
    return out
