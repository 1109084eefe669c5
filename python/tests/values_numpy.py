"""What the values carried, written here from the papers' formulas in float64 NumPy — value
norms and value-weighted attention (Kobayashi et al. 2020, "Attention is not only a weight"), the
residual-and-norm mixing (Kobayashi et al. 2021), attention rollout (Abnar & Zuidema 2020) and
the sinks' numbers — from a layer of `qkv explain --json` (with --layer: its w_o, mixing_gain and
stream_in) alone; none of it from qkv. Shared by test_values.py (the command's JSON) and
test_values_arrays.py (Explanation's arrays).

Tolerance: qkv computes in float64 from the same float32 numbers the JSON prints exactly (17
digits), in another order; docs/CONVENTIONS.md §1.2 allows NumPy checks a relative error of 1e-9,
far above the ~1e-15 they differ by and far below what a dropped head or residual makes (each
test file shows one number moved by 1e-7 of its scale fails)."""
import numpy as np

RELATIVE = 1e-9


def check(got, want, what):
    """The checker: max |got − want| ≤ 1e-9·max(1, max |want|)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    worst = np.max(np.abs(got - want))
    bound = RELATIVE * max(1.0, np.max(np.abs(want)))
    assert worst <= bound, f"{what}: max |Δ| {worst:.3e} > {bound:.3e}"


def perturbed(x):
    """x with one number, the middle one, moved by 1e-7 of its scale."""
    x = np.array(x, dtype=np.float64)
    x.flat[x.size // 2] += 1e-7 * max(1.0, np.max(np.abs(x)))
    return x


def written(layer):
    """f^h(x_j) = W_O^h v^h_j [H, m, hidden]: W_O [hidden, H·d], its columns h·d … h·d + d − 1
    taking head h; v [H, m, d] as captured (BERT's bias b_V included)."""
    w_o, v = np.array(layer["w_o"]), np.array(layer["v"])
    heads, _, d = v.shape
    return np.einsum("rhk,hjk->hjr", w_o.reshape(w_o.shape[0], heads, d), v)


def value_norms(layer):
    return np.linalg.norm(written(layer), axis=2)


def value_weighted(layer):
    """‖α^h_ij f^h(x_j)‖ [H, n, m]: the norm of the product itself, not α times a norm."""
    return np.linalg.norm(np.array(layer["weights"])[..., None] * written(layer)[:, None, :, :],
                          axis=3)


def mixing(layer):
    """Kobayashi et al. 2021: c_ij = [i = j]·x_i + Σ_h α^h_ij f^h(x_j); post-LN (a gain given),
    each part centred and multiplied by γ (the 1/σ_i of the whole sum is common to the row);
    each row's ‖c_ij‖ / Σ_k ‖c_ik‖."""
    f, alpha, x = written(layer), np.array(layer["weights"]), np.array(layer["stream_in"])
    n = x.shape[0]
    parts = np.einsum("hij,hjr->ijr", alpha, f) + np.eye(n)[:, :, None] * x[:, None, :]
    if layer["mixing_gain"] is not None:
        parts = (parts - parts.mean(axis=2, keepdims=True)) * np.array(layer["mixing_gain"])
    norms = np.linalg.norm(parts, axis=2)
    return norms / norms.sum(axis=1, keepdims=True)


def rollout(steps):
    out, r = [], np.eye(steps[0].shape[0])
    for a in steps:
        r = a @ r
        out.append(r)
    return out


def residual_averaged(weights):
    """Abnar & Zuidema 2020: ½·mean_h A + ½·I, rows renormalised."""
    a = 0.5 * np.array(weights).mean(axis=0) + 0.5 * np.eye(len(weights[0]))
    return a / a.sum(axis=1, keepdims=True)


def sink_numbers(weights, norms):
    """One head's [weight, first_norm, others_norm, value_share, moved] from its weights [n, n]
    and value norms [n], over queries i ≥ 1 (n ≤ 128: every one)."""
    w, f = np.asarray(weights, dtype=np.float64), np.asarray(norms, dtype=np.float64)
    moved = w[1:] * f
    return [w[1:, 0].mean(), f[0], f[1:].mean(), (moved[:, 0] / moved.sum(axis=1)).mean(),
            moved.sum(axis=1).mean()]
