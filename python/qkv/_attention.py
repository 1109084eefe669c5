"""qkv.attention and qkv.attention_backward: PyTorch's scaled_dot_product_attention conventions on
NumPy arrays, computed by qkv's C++ kernels; on CUDA arrays (PyTorch's, CuPy's, ...) by its GPU
kernels (_device.py)."""

from collections.abc import Mapping
from typing import Any, Dict, NamedTuple, Optional, Union

import numpy as np

from . import _checks, _device, _qkv

_FLOATS = (np.float32, np.float64)


def _array(x, name):
    """x as an array qkv can view without a copy: float32/float64 (or bool for a mask), strides
    that are whole, non-negative elements, aligned. Anything else is copied once here; a list or
    a PyTorch CPU tensor becomes an array (PyTorch's shares its memory)."""
    try:
        a = x if isinstance(x, np.ndarray) else np.asarray(x)
    except (TypeError, ValueError) as e:  # a ragged list, an object NumPy cannot read
        why = (str(e).splitlines() or [""])[0]
        raise TypeError(f"{name}: {type(x).__name__} is not an array ({why}); expected a "
                        "float32 or float64 array") from None
    if a.dtype not in _FLOATS and not (name == "attn_mask" and a.dtype == np.bool_):
        expected = "float32 or float64, or bool" if name == "attn_mask" else "float32 or float64"
        raise TypeError(f"{name}: {a.dtype} array; expected {expected}")
    item = a.itemsize
    if (any(s < 0 or s % item for s in a.strides) or a.ctypes.data % item) and a.size:
        # np.require, not ascontiguousarray: a contiguous array at an odd address is returned
        # as it is by the latter, and reached qkv unaligned (issue 26's last sweep).
        a = np.require(a, requirements=["C", "A"])
    return a


def _prepare(query, key, value, attn_mask, is_causal, scale, enable_gqa, score,
             causal_alignment, params):
    is_causal = _checks.flag(is_causal, "is_causal")
    enable_gqa = _checks.flag(enable_gqa, "enable_gqa")
    q, k, v = _array(query, "query"), _array(key, "key"), _array(value, "value")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"query, key and value have dtypes {q.dtype}, {k.dtype}, {v.dtype}; "
                        "expected one dtype (as PyTorch's scaled_dot_product_attention)")
    for name, a in (("query", q), ("key", k), ("value", v)):
        if not 2 <= a.ndim <= 4:
            raise ValueError(f"{name}: {a.ndim} dimensions {a.shape}; expected 2 to 4: "
                             "(L, E), (H, L, E) or (N, H, L, E)")
    if q.ndim >= 3 and k.ndim >= 3 and not enable_gqa and q.shape[-3] != k.shape[-3]:
        raise ValueError(f"query has {q.shape[-3]} heads, key {k.shape[-3]}; pass "
                         "enable_gqa=True for grouped-query attention (as PyTorch)")
    mask = None
    if attn_mask is not None:
        if is_causal:
            raise ValueError("attn_mask and is_causal=True together; expected one of them "
                             "(as PyTorch's scaled_dot_product_attention)")
        mask = _array(attn_mask, "attn_mask")
        if mask.dtype != np.bool_ and mask.dtype != q.dtype:
            raise TypeError(f"attn_mask: {mask.dtype}; expected bool or the query's {q.dtype}")
    if _checks.text(causal_alignment, "causal_alignment") not in ("top_left", "bottom_right"):
        raise ValueError(f"causal_alignment '{causal_alignment}'; expected top_left (PyTorch's "
                         "is_causal) or bottom_right (a KV cache's)")
    causal = causal_alignment if is_causal else "none"
    if scale is not None:
        scale = _checks.number(scale, "scale")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"params: {type(params).__name__}; expected a dict of arrays (general: "
                        "w; additive: w_q, w_k, v)")
    p = {_checks.text(name, "params' key"): _array(a, f"params['{name}']")
         for name, a in (params or {}).items()}
    # The score's name is checked by qkv (which also takes the command's "scaled-dot"). Params a
    # known score does not read are refused, as the command refuses them (they were ignored).
    score = _checks.text(score, "score")
    takes = {"general": {"w"}, "additive": {"w_q", "w_k", "v"}}
    known = {"scaled_dot", "scaled-dot", "dot", "general", "additive", "laplace", "cosine",
             "uniform"}
    # (A key no score reads, e.g. 'W', is qkv's to name.)
    unread = sorted(set(p) & {"w", "w_q", "w_k", "v"} - takes.get(score, set())) \
        if score in known else []
    if unread:
        reads = takes.get(score)
        raise ValueError(f"params {', '.join(unread)} given, but score {score} "
                         + (f"reads only {', '.join(sorted(reads))}" if reads
                            else "has no parameters")
                         + "; expected params only for general (w) or additive (w_q, w_k, v)")
    return q, k, v, mask, causal, scale, score, p


def attention(query, key, value, attn_mask=None, is_causal: bool = False,
              scale: Optional[float] = None, enable_gqa: bool = False, *,
              score: str = "scaled_dot", causal_alignment: str = "top_left",
              normalize: str = "softmax", params: Optional[Dict[str, np.ndarray]] = None,
              need_weights: bool = False, path: str = "auto", keep_for_backward: bool = False,
              precision: str = "fp32",
              memory_limit: Optional[int] = None) -> Union[np.ndarray, tuple]:
    """Attention of `query` over `key` and `value`: softmax(scale·score(Q, K) + mask)·V.

    The arguments PyTorch's torch.nn.functional.scaled_dot_product_attention has mean what they
    mean there: query (..., L, E), key (..., S, E), value (..., S, Ev) as (L, E), (H, L, E) or
    (N, H, L, E) float32 or float64 arrays; attn_mask a bool array (True: the query may attend to
    the key) or a float array added to the scores, broadcast to (N, H, L, S); is_causal the
    top-left causal mask (not with attn_mask); scale 1/√E when None; enable_gqa lets H query heads
    share Hkv key/value heads (H a multiple of Hkv; query head h reads key/value head h // (H //
    Hkv)). One difference: a query that may attend to no key gets output 0, not NaN.

    Beyond PyTorch: score — "scaled_dot" (the default), "dot", "general" (params w), "additive"
    (params w_q, w_k, v: Bahdanau), "laplace", "cosine", "uniform"; causal_alignment="bottom_right"
    (the last query sees every key, as with a KV cache); normalize="none" (the scaled scores as
    weights); need_weights=True returns (out, weights) with the weights (N, H, L, S);
    keep_for_backward=True returns (out, saved) (or (out, weights, saved)), where `saved` lets
    attention_backward(..., saved=saved) skip the forward pass it would otherwise run again, as
    PyTorch keeps what its backward needs from the forward.

    precision="bf16" (opt-in; "fp32" is the default): q, k, v and the weights are rounded to
    bfloat16 before float32 products (on the float64 reference path: the float64 result of q, k, v
    rounded to bfloat16), faster where the CPU has bf16 and less exact — errors of a few 10⁻³ of
    max|v| (docs/CONVENTIONS.md §1.1b). attention_backward takes the same precision.

    Any size may be 0 (include/qkv/attention.h): no queries (L = 0) give an empty output, as
    PyTorch's; no keys (S = 0) leave every query nothing to attend to (output 0); a head dim E = 0
    makes every score 0 (even weights; the default scale is then 1, not 1/√0).

    memory_limit: bytes the call may allocate beyond its inputs (default: half the machine's
    memory), as `qkv attend --memory-limit`: the fused float32 path (scaled_dot or dot, softmax,
    no weights) needs memory linear in L and S; need_weights, the other scores or float64 keep
    (N, H, L, S) matrices in float64 (12 to 16 bytes a weight, more with a mask). An estimate past
    the limit raises MemoryError naming both sizes before any work.

    CUDA arrays (issue 32): query, key and value (and attn_mask) all on one NVIDIA GPU — torch
    CUDA tensors, CuPy or Numba arrays (__cuda_array_interface__), JAX's (DLPack) — float32,
    bfloat16 or float16 (one dtype; a mask bool or float32) run on qkv's GPU kernels, read in
    place, on the array's current stream (torch.cuda.current_stream(), CuPy's current stream),
    asynchronously as the library's own operations are; the results are new arrays of the same
    library and device (JAX's: allocated by torch or CuPy, handed over through DLPack). There:
    score scaled_dot or dot, softmax, no need_weights or params, path "auto" or "cuda";
    memory_limit does not apply. A mix of host and CUDA arrays is a ValueError naming which is
    where; a build without CUDA or a machine without a GPU, a RuntimeError saying so. With
    path="cuda", host arrays are copied to the GPU and back (float32; precision="bf16" runs the
    bf16 tensor-core kernels).

    Arrays are read where they lie (no copy for float32/float64 arrays of any non-negative
    strides); results are new NumPy arrays of the inputs' dtype. The computation runs on qkv's
    threads ($QKV_NUM_THREADS) without the GIL. Bad arguments raise ValueError or TypeError with
    one line naming the argument, what it was and what was expected.

    >>> import numpy as np, qkv
    >>> q = np.array([[1.0, 0.0]]); k = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[10.0], [20.0]])
    >>> out, w = qkv.attention(q, k, v, need_weights=True)
    >>> np.round(w, 3)          # softmax([1, 0] / √2)
    array([[0.67, 0.33]])
    >>> np.round(out, 2)        # 0.67·10 + 0.33·20
    array([[13.3]])
    """
    if _device.split((("query", query), ("key", key), ("value", value),
                      ("attn_mask", attn_mask))):
        return _device_attention(query, key, value, attn_mask, is_causal, scale, enable_gqa,
                                 score, causal_alignment, normalize, params, need_weights, path,
                                 keep_for_backward, precision)
    q, k, v, mask, causal, scale, score, p = _prepare(query, key, value, attn_mask, is_causal,
                                                      scale, enable_gqa, score,
                                                      causal_alignment, params)
    need_weights = _checks.flag(need_weights, "need_weights")
    keep_for_backward = _checks.flag(keep_for_backward, "keep_for_backward")
    out, weights, saved_max, saved_sum, fingerprint = _qkv.attention(
        q, k, v, mask, causal, scale, score, _checks.text(normalize, "normalize"), p,
        need_weights, _checks.text(path, "path"), keep_for_backward,
        _checks.choice(precision, "precision", ("fp32", "bf16")),
        _checks.memory_limit(memory_limit))
    result = (out, weights) if need_weights else (out,)
    if keep_for_backward:
        # The saved output is a read-only copy, the max and sum read-only: `out` shared with
        # saved.out, an `out *= 2` after the forward changed what the backward read, and it
        # returned wrong gradients without a word (issue 26's last sweep).
        result += (SavedForward(_read_only(out.copy()), _read_only(saved_max),
                                _read_only(saved_sum), fingerprint),)
    return result if len(result) > 1 else out


def _read_only(a: Optional[np.ndarray]) -> Optional[np.ndarray]:
    if a is not None:
        a.flags.writeable = False
    return a


class SavedForward(NamedTuple):
    """What qkv.attention(..., keep_for_backward=True) keeps for qkv.attention_backward: the
    output and, where the fused float32 kernel ran, each row's softmax as it formed it (max and
    sum; None on the float64 reference path, whose backward runs the forward again); and the
    fingerprint of what it was computed from (the inputs' dtypes, shapes and a hash of their
    values; the options), with which attention_backward refuses the saved forward of other
    inputs or options rather than return wrong gradients. On CUDA arrays: out and logsumexp
    (float32, [..., L]) on the GPU, max and sum None, and a fingerprint of the arrays' addresses,
    dtypes, shapes and the options (device memory is not hashed: an array changed in place
    since the forward goes unseen there)."""
    out: np.ndarray
    max: Optional[np.ndarray]
    sum: Optional[np.ndarray]
    fingerprint: Any  # qkv._qkv.ForwardFingerprint (host) or _device.DeviceFingerprint, opaque
    logsumexp: Any = None  # CUDA arrays only


class AttentionGrads(NamedTuple):
    """The gradients of a loss with respect to each input of qkv.attention."""
    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    dparams: Dict[str, np.ndarray]  # of params (general: w; additive: w_q, w_k, v)
    dscale: Optional[float]  # ∂loss/∂scale; None on CUDA arrays (the GPU does not compute it)


def attention_backward(grad_out, query, key, value, attn_mask=None, is_causal: bool = False,
                       scale: Optional[float] = None, enable_gqa: bool = False, *,
                       score: str = "scaled_dot", causal_alignment: str = "top_left",
                       normalize: str = "softmax",
                       params: Optional[Dict[str, np.ndarray]] = None,
                       saved: Optional[SavedForward] = None, precision: str = "fp32",
                       memory_limit: Optional[int] = None) -> AttentionGrads:
    """Gradients of a loss through qkv.attention, given grad_out = ∂loss/∂out (the output's
    shape): AttentionGrads(dq, dk, dv, dparams, dscale), each the shape and dtype of what it
    differentiates. The arguments are qkv.attention's; `saved`, from qkv.attention(...,
    keep_for_backward=True) on the same inputs, spares the forward pass the backward would
    otherwise run again (the same bits either way). A `saved` of other inputs (another array,
    or the same one changed in place since) or other options (is_causal, scale, attn_mask,
    score, precision, ...) is refused with a ValueError that says what differs. memory_limit: as
    qkv.attention's (the gradients, the forward run again and its working set, estimated before
    the work; past the limit, MemoryError naming both sizes).

    >>> import numpy as np, qkv
    >>> rng = np.random.default_rng(0)
    >>> q, k, v = (rng.standard_normal((2, 4, 8)) for _ in range(3))
    >>> g = qkv.attention_backward(np.ones((2, 4, 8)), q, k, v, is_causal=True)
    >>> g.dq.shape, g.dk.shape, g.dv.shape
    ((2, 4, 8), (2, 4, 8), (2, 4, 8))
    """
    if _device.split((("grad_out", grad_out), ("query", query), ("key", key),
                      ("value", value), ("attn_mask", attn_mask))):
        return _device_attention_backward(grad_out, query, key, value, attn_mask, is_causal,
                                          scale, enable_gqa, score, causal_alignment, normalize,
                                          params, saved, precision)
    q, k, v, mask, causal, scale, score, p = _prepare(query, key, value, attn_mask, is_causal,
                                                      scale, enable_gqa, score,
                                                      causal_alignment, params)
    dout = _array(grad_out, "grad_out")
    if saved is not None and not isinstance(saved, SavedForward):
        raise TypeError(f"saved: {type(saved).__name__}; expected the SavedForward that "
                        "qkv.attention(..., keep_for_backward=True) returned")
    if saved is not None and saved.logsumexp is not None:
        raise ValueError("saved: the forward of CUDA arrays, given host arrays; expected the "
                         "SavedForward of qkv.attention(..., keep_for_backward=True) on these")
    out, saved_max, saved_sum, fingerprint = saved[:4] if saved is not None else (None,) * 4
    out, saved_max, saved_sum = (None if a is None else _array(a, f"saved.{name}")
                                 for a, name in ((out, "out"), (saved_max, "max"),
                                                 (saved_sum, "sum")))
    if fingerprint is not None and not isinstance(fingerprint, _qkv.ForwardFingerprint):
        raise TypeError(f"saved.fingerprint: {type(fingerprint).__name__}; expected the one "
                        "qkv.attention(..., keep_for_backward=True) returned")
    return AttentionGrads(*_qkv.attention_backward(
        dout, q, k, v, mask, causal, scale, score, _checks.text(normalize, "normalize"), p, out,
        saved_max, saved_sum, fingerprint,
        _checks.choice(precision, "precision", ("fp32", "bf16")),
        _checks.memory_limit(memory_limit)))


# ---- CUDA arrays (_device.py) ----

def _device_options(is_causal, scale, enable_gqa, score, causal_alignment, normalize, params,
                    precision):
    """The checked options of a call on CUDA arrays: (is_causal, enable_gqa, causal, scale,
    score, normalize, precision), each failure one line as on the host."""
    is_causal = _checks.flag(is_causal, "is_causal")
    enable_gqa = _checks.flag(enable_gqa, "enable_gqa")
    if _checks.text(causal_alignment, "causal_alignment") not in ("top_left", "bottom_right"):
        raise ValueError(f"causal_alignment '{causal_alignment}'; expected top_left (PyTorch's "
                         "is_causal) or bottom_right (a KV cache's)")
    causal = causal_alignment if is_causal else "none"
    if scale is not None:
        scale = _checks.number(scale, "scale")
    if params is not None and not isinstance(params, Mapping):
        raise TypeError(f"params: {type(params).__name__}; expected a dict of arrays (general: "
                        "w; additive: w_q, w_k, v)")
    return (is_causal, enable_gqa, causal, scale, _checks.text(score, "score"),
            _checks.text(normalize, "normalize"),
            _checks.choice(precision, "precision", ("fp32", "bf16")))


def _device_inputs(query, key, value, attn_mask, is_causal, enable_gqa):
    q, k, v = (_device.view(x, name) for x, name in ((query, "query"), (key, "key"),
                                                      (value, "value")))
    _device.check_shapes(q, k, v, enable_gqa)
    return q, k, v, _device.mask_view(attn_mask, is_causal)


def _device_attention(query, key, value, attn_mask, is_causal, scale, enable_gqa, score,
                      causal_alignment, normalize, params, need_weights, path, keep_for_backward,
                      precision):
    is_causal, enable_gqa, causal, scale, score, normalize, precision = _device_options(
        is_causal, scale, enable_gqa, score, causal_alignment, normalize, params, precision)
    need_weights = _checks.flag(need_weights, "need_weights")
    keep_for_backward = _checks.flag(keep_for_backward, "keep_for_backward")
    _device.refuse_host_only(_checks.text(path, "path"), need_weights, params, score, normalize)
    q, k, v, m = _device_inputs(query, key, value, attn_mask, is_causal, enable_gqa)
    _device.require_gpu(q, "query")
    _device.prepare_inputs((q, k, v, m))
    out, _, lse, _ = _device.run_forward(q, k, v, m, causal, scale, score, precision,
                                         need_lse=keep_for_backward)
    out, lse = _device.finish(q, [out, lse])
    if not keep_for_backward:
        return out
    return out, SavedForward(out, None, None,
                             _device.fingerprint((q, k, v, m), (causal, scale, score, precision)),
                             lse)


def _device_attention_backward(grad_out, query, key, value, attn_mask, is_causal, scale,
                               enable_gqa, score, causal_alignment, normalize, params, saved,
                               precision):
    is_causal, enable_gqa, causal, scale, score, normalize, precision = _device_options(
        is_causal, scale, enable_gqa, score, causal_alignment, normalize, params, precision)
    _device.refuse_host_only("cuda", False, params, score, normalize)
    q, k, v, m = _device_inputs(query, key, value, attn_mask, is_causal, enable_gqa)
    d = _device.view(grad_out, "grad_out", dtypes=(q.dtype,))
    out_shape = q.shape[:-1] + (v.shape[-1],)
    if d.shape != out_shape:
        raise ValueError(f"grad_out: shape {d.shape}; expected the output's {out_shape}")
    _device.require_rows(d, "grad_out")
    if saved is not None:
        if not isinstance(saved, SavedForward):
            raise TypeError(f"saved: {type(saved).__name__}; expected the SavedForward that "
                            "qkv.attention(..., keep_for_backward=True) returned")
        if saved.logsumexp is None:
            raise ValueError("saved: the forward of host arrays, given CUDA arrays; expected the "
                             "SavedForward of qkv.attention(..., keep_for_backward=True) on these")
        now = _device.fingerprint((q, k, v, m), (causal, scale, score, precision))
        if saved.fingerprint != now:
            raise ValueError("saved: the saved forward was computed from "
                             + _device.difference(saved.fingerprint, now)
                             + "; expected the SavedForward of these very arrays and options")
    _device.require_gpu(q, "query")
    _device.prepare_inputs((d, q, k, v, m))
    if saved is not None:
        out_v = _device.view(saved.out, "saved.out", dtypes=(q.dtype,))
        lse_v = _device.view(saved.logsumexp, "saved.logsumexp", dtypes=("float32",))
    else:  # the forward first, on the same stream
        _, out_v, _, lse_v = _device.run_forward(q, k, v, m, causal, scale, score, precision,
                                                 need_lse=True)
    grads = [_device.empty(q, a.shape, q.dtype) for a in (q, k, v)]
    _qkv.device_attention_backward(d.arg(), q.arg(), k.arg(), v.arg(),
                                   None if m is None else m.arg(), out_v.arg(), lse_v.arg(),
                                   *(g[1].arg() for g in grads), causal, scale, score,
                                   "softmax", precision, q.stream)
    dq, dk, dv = _device.finish(q, [g[0] for g in grads])
    return AttentionGrads(dq, dk, dv, {}, None)
