"""CUDA arrays in qkv.attention and qkv.attention_backward (issue 32, python/qkv/_device.py).

Two kinds of tests. Those that run everywhere: how an array is found to be on the GPU (torch's
is_cuda, __cuda_array_interface__, __dlpack_device__), the dtype names, strides from bytes to
elements, and every error path — a mix of host and CUDA arrays, options the GPU has not, and, on a
machine without a GPU (or a build without CUDA), the one-line RuntimeError — with fake objects
that expose __cuda_array_interface__ and point at nothing (never dereferenced: the fakes only
reach qkv where no GPU is present, and those tests skip where one is).

And those that need PyTorch with a GPU (skipped, with the reason, where either is absent): the
results against the float64 reference by docs/CONVENTIONS.md's rules — float32 within
2·max|N − R| + 1e-6 of it (N: a naive float32 computation), bfloat16 and float16 within twice a
naive same-dtype computation's error plus a small floor (flash-attention's rule) — forward and
backward, causal both ways, GQA, masks, strided views, a side stream; outputs torch tensors on the
inputs' device and dtype; CuPy's arrays likewise where CuPy is installed."""

import math

import numpy as np
import pytest

import qkv
from qkv import _device, _qkv
from conftest import attend_numpy as ref

BUILT, PRESENT, DESCRIPTION = _qkv.cuda_device()

no_gpu_here = pytest.mark.skipif(
    PRESENT, reason="a GPU is present: the fakes' pointers would reach it (these test the "
    "no-GPU error path)")


class FakeCuda:
    """An object with __cuda_array_interface__ (version 3) and nothing behind its pointer."""

    def __init__(self, shape, typestr="<f4", strides=None, ptr=0x7F0000000000, stream=None,
                 **extra):
        self.shape = tuple(shape)
        self.__cuda_array_interface__ = dict(shape=self.shape, typestr=typestr,
                                             data=(ptr, False), strides=strides, version=3,
                                             stream=stream, **extra)


class FakeDLPack:
    """An object that says it is a DLPack array on `device` (never exported here)."""

    def __init__(self, device):
        self._device = device

    def __dlpack__(self, stream=None):
        raise AssertionError("not exported in these tests")

    def __dlpack_device__(self):
        return self._device


def fakes(L=5, S=7, D=4, H=2, Hkv=2, typestr="<f4"):
    return (FakeCuda((1, H, L, D), typestr), FakeCuda((1, Hkv, S, D), typestr),
            FakeCuda((1, Hkv, S, D), typestr))


# ---- detection, dtypes, strides: no GPU needed ----

def test_host_arrays_are_not_device_arrays():
    for x in (np.zeros((2, 3), np.float32), [[1.0, 2.0]], 3.0, None, np.float32(1)):
        assert not _device.is_device(x)
    assert _device.split((("query", np.zeros((2, 2))), ("key", None))) is False


def test_cuda_array_interface_and_dlpack_devices_are_found():
    assert _device.is_device(FakeCuda((2, 3)))
    assert _device.is_device(FakeDLPack((2, 0)))  # kDLCUDA
    assert _device.is_device(FakeDLPack((13, 1)))  # kDLCUDAManaged
    assert not _device.is_device(FakeDLPack((1, 0)))  # kDLCPU
    assert not _device.is_device(FakeDLPack((3, 0)))  # kDLCUDAHost: pinned host memory


def test_an_interface_that_raises_is_not_a_device_array():
    class Refuses:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("Can't get __cuda_array_interface__ on a tensor that requires grad")

    assert not _device.is_device(Refuses())


@pytest.mark.parametrize("typestr, name", [("<f4", "float32"), ("<f2", "float16"),
                                           ("|b1", "bool")])
def test_typestrs_map_to_qkv_dtypes(typestr, name):
    v = _device.view(FakeCuda((3, 4), typestr), "x", dtypes=("float32", "float16", "bool"))
    assert v.dtype == name
    assert v.shape == (3, 4) and v.strides == (4, 1) and v.kind == "cuda_array_interface"


@pytest.mark.parametrize("typestr", ["<f8", "<i4", "<V2"])
def test_unsupported_typestrs_are_named(typestr):
    with pytest.raises(TypeError, match=f"query: a CUDA array of typestr '{typestr}'"):
        _device.view(FakeCuda((3, 4), typestr), "query")
    if typestr == "<V2":
        with pytest.raises(TypeError, match="bfloat16 has no __cuda_array_interface__ typestr"):
            _device.view(FakeCuda((3, 4), typestr), "query")


def test_a_bool_array_is_refused_as_query():
    with pytest.raises(TypeError, match="query: a bool CUDA array; expected float32, bfloat16 "
                       "or float16"):
        _device.view(FakeCuda((3, 4), "|b1"), "query")


def test_byte_strides_become_element_strides():
    # A [2, 3, 4] float32 view of a [2, 4, 3]-like buffer: strides in bytes 48, 4, 12.
    v = _device.view(FakeCuda((2, 3, 4), "<f4", strides=(48, 4, 12)), "x")
    assert v.strides == (12, 1, 3)
    v = _device.view(FakeCuda((2, 3, 4), "<f2", strides=(48, 16, 2)), "x")
    assert v.strides == (24, 8, 1)
    assert _device.view(FakeCuda((2, 3, 4)), "x").strides == (12, 4, 1)  # None: row-major
    assert _device.contiguous_strides((0, 3, 5)) == (15, 5, 1)
    assert _device.element_strides((8, 4), (2, 2), 4, "x") == (2, 1)


def test_strides_that_are_not_whole_elements_or_negative_are_refused():
    with pytest.raises(ValueError, match="x: stride 6 bytes in dimension 1 is not a whole number "
                       "of 4-byte elements"):
        _device.view(FakeCuda((2, 3), "<f4", strides=(24, 6)), "x")
    with pytest.raises(ValueError, match="x: negative strides"):
        _device.view(FakeCuda((2, 3), "<f4", strides=(-12, 4)), "x")
    with pytest.raises(ValueError, match="masked CUDA array"):
        _device.view(FakeCuda((2, 3), mask=object()), "x")


def test_the_interface_stream_is_the_call_stream():
    assert _device.view(FakeCuda((2, 3), stream=None), "x").stream == 0
    assert _device.view(FakeCuda((2, 3), stream=1), "x").stream == 1  # cudaStreamLegacy
    assert _device.view(FakeCuda((2, 3), stream=0xABC0), "x").stream == 0xABC0


def test_a_view_passes_pointer_dtype_shape_and_element_strides():
    v = _device.view(FakeCuda((2, 3), "<f4", ptr=0x1234500, strides=(16, 4)), "x")
    assert v.arg() == (0x1234500, "float32", [2, 3], [4, 1])


# ---- errors before any GPU work ----

def test_a_mix_of_host_and_cuda_arrays_says_which_is_where():
    q = np.zeros((1, 2, 5, 4), np.float32)
    _, k, v = fakes()
    with pytest.raises(ValueError) as e:
        qkv.attention(q, k, v)
    msg = str(e.value)
    assert "\n" not in msg
    assert "query is on the host (numpy.ndarray)" in msg
    assert "key and value are on a CUDA device (" in msg and "FakeCuda" in msg
    with pytest.raises(ValueError, match="grad_out is on the host"):
        qkv.attention_backward(np.zeros((1, 2, 5, 4), np.float32), *fakes())
    qd, kd, vd = fakes()
    with pytest.raises(ValueError, match="attn_mask is on the host"):
        qkv.attention(qd, kd, vd, attn_mask=np.ones((5, 7), bool))


@pytest.mark.parametrize("kwargs, match", [
    ({"need_weights": True}, "need_weights=True with CUDA arrays"),
    ({"score": "laplace"}, "score 'laplace' with CUDA arrays"),
    ({"normalize": "none"}, "normalize 'none' with CUDA arrays"),
    ({"path": "fused"}, "path 'fused' runs on the CPU"),
    ({"params": {"w": np.eye(4)}}, "params with CUDA arrays"),
    ({"precision": "fp16"}, "precision 'fp16'"),
])
def test_options_the_gpu_has_not_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        qkv.attention(*fakes(), **kwargs)


def test_shapes_and_dtypes_are_checked_on_cuda_arrays():
    q, k, v = fakes()
    with pytest.raises(TypeError, match="dtypes float32, float16, float32"):
        qkv.attention(q, FakeCuda(k.shape, "<f2"), v)
    with pytest.raises(ValueError, match="query has 4 heads, key 2; pass enable_gqa=True"):
        qkv.attention(*fakes(H=4, Hkv=2))
    with pytest.raises(ValueError, match="query: 5 dimensions"):
        qkv.attention(FakeCuda((1, 1, 2, 5, 4)), k, v)
    with pytest.raises(ValueError, match="key: its last dimension has stride 2 elements"):
        qkv.attention(q, FakeCuda(k.shape, strides=(224, 112, 8, 8)), v)
    with pytest.raises(ValueError, match="attn_mask and is_causal=True together"):
        qkv.attention(q, k, v, attn_mask=FakeCuda((5, 7), "|b1"), is_causal=True)
    with pytest.raises(TypeError, match="attn_mask: a float16 CUDA array; expected bool or float32"):
        qkv.attention(q, k, v, attn_mask=FakeCuda((5, 7), "<f2"))
    with pytest.raises(ValueError, match=r"grad_out: shape \(1, 2, 5, 3\); expected the output's"):
        qkv.attention_backward(FakeCuda((1, 2, 5, 3)), q, k, v)
    with pytest.raises(TypeError, match="grad_out: a float16 CUDA array; expected float32"):
        qkv.attention_backward(FakeCuda((1, 2, 5, 4), "<f2"), q, k, v)


def test_a_host_forward_is_refused_for_cuda_arrays_and_the_other_way():
    rng = np.random.default_rng(0)
    qh, kh, vh = (rng.standard_normal((1, 2, 5, 4)).astype(np.float32) for _ in range(3))
    _, saved = qkv.attention(qh, kh, vh, keep_for_backward=True)
    with pytest.raises(ValueError, match="saved: the forward of host arrays, given CUDA arrays"):
        qkv.attention_backward(FakeCuda((1, 2, 5, 4)), *fakes(S=5), saved=saved)
    device_saved = qkv.SavedForward(None, None, None, None, logsumexp=FakeCuda((1, 2, 5)))
    with pytest.raises(ValueError, match="saved: the forward of CUDA arrays, given host arrays"):
        qkv.attention_backward(np.ones_like(qh), qh, kh, vh, saved=device_saved)


def test_another_arrays_saved_forward_is_refused():
    q, k, v = fakes()
    fp = _device.fingerprint([_device.view(x, "x") for x in (q, k, v)] + [None],
                             ("top_left", None, "scaled_dot", "fp32"))
    saved = qkv.SavedForward(FakeCuda((1, 2, 5, 4)), None, None, fp, FakeCuda((1, 2, 5)))
    other_k = FakeCuda(k.shape, ptr=0x7F0000100000)
    with pytest.raises(ValueError, match="computed from another key, causal 'top_left', not "
                       "'none'; expected the SavedForward of these very arrays"):
        qkv.attention_backward(FakeCuda((1, 2, 5, 4)), q, other_k, v, saved=saved)


@no_gpu_here
def test_cuda_arrays_without_a_gpu_raise_one_runtime_error_line():
    with pytest.raises(RuntimeError) as e:
        qkv.attention(*fakes())
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("query is a CUDA array (FakeCuda on a CUDA device), but ")
    assert msg.endswith(DESCRIPTION)
    assert ("no CUDA device" in DESCRIPTION) if BUILT else ("built without CUDA" in DESCRIPTION)
    with pytest.raises(RuntimeError, match="query is a CUDA array"):
        qkv.attention_backward(FakeCuda((1, 2, 5, 4)), *fakes())
    # bfloat16 and float16 alike (bfloat16 from DLPack producers; float16 here).
    with pytest.raises(RuntimeError, match="but " + DESCRIPTION[:20]):
        qkv.attention(*fakes(typestr="<f2"))


@no_gpu_here
def test_the_extension_itself_refuses_without_a_gpu():
    q, k, v = (_device.view(x, n).arg() for x, n in zip(fakes(), ("q", "k", "v")))
    out = (0x7F0000200000, "float32", [1, 2, 5, 4], [40, 20, 4, 1])
    with pytest.raises(RuntimeError) as e:
        _qkv.device_attention(q, k, v, None, out, None, "none", None, "scaled_dot", "softmax",
                              "fp32", 0)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="query: float64 device array; expected float32, "
                       "bfloat16, float16"):
        _qkv.device_attention((q[0], "float64", q[2], q[3]), k, v, None, out, None, "none", None,
                              "scaled_dot", "softmax", "fp32", 0)


def test_cuda_device_reports_what_this_build_and_machine_have():
    assert isinstance(BUILT, bool) and isinstance(PRESENT, bool)
    assert DESCRIPTION and "\n" not in DESCRIPTION
    if not PRESENT:
        assert DESCRIPTION.startswith(("no CUDA device", "qkv was built without CUDA"))


@no_gpu_here
def test_host_arrays_on_path_cuda_without_a_gpu_raise_one_line():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 5, 4)).astype(np.float32)
    with pytest.raises(RuntimeError) as e:
        qkv.attention(q, q, q, path="cuda")
    assert "\n" not in str(e.value)


def test_host_arrays_run_on_the_cpu_as_before():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, n, 8)).astype(np.float32) for n in (5, 7, 7))
    out = qkv.attention(q, k, v, is_causal=True)
    assert type(out) is np.ndarray and out.dtype == np.float32
    want = ref.reference(q, k, v, causal="top-left")[0]
    assert np.abs(out - want).max() < 1e-5
    g = qkv.attention_backward(np.ones_like(out), q, k, v, is_causal=True)
    assert type(g.dq) is np.ndarray and g.dscale is not None


# ---- on a GPU, through PyTorch ----

@pytest.fixture(scope="module")
def torch():
    try:
        import torch
    except ImportError:
        pytest.skip("PyTorch is not installed: the GPU tests need torch.cuda")
    if not torch.cuda.is_available():
        pytest.skip("torch.cuda.is_available() is False: no GPU here")
    if not PRESENT:
        pytest.skip(f"qkv sees no GPU where torch does: {DESCRIPTION}")
    return torch


def reference64(q, k, v, causal="none", mask=None, scale=None):
    """float64 out and lse of torch tensors, on the CPU (tests/golden/attend_numpy.py)."""
    to = lambda t: None if t is None else t.detach().double().cpu().numpy()  # noqa: E731
    c = {"none": None, "top_left": "top-left", "bottom_right": "bottom-right"}[causal]
    m = to(mask) if mask is not None and mask.dtype.is_floating_point else \
        (None if mask is None else mask.cpu().numpy())
    out, _, lse = ref.reference(*(four(to(t)) for t in (q, k, v)), causal=c, mask=m, scale=scale)
    return out.reshape(q.shape[:-1] + (v.shape[-1],)), lse


def four(a):
    return a.reshape((1,) * (4 - a.ndim) + a.shape)


def naive(torch, q, k, v, causal="none", mask=None, dtype=None):
    """The same-dtype naive computation (on the GPU, TF32 off): products' inputs in `dtype`,
    P rounded to it too, float32 sums; the yardstick of the rules."""
    dtype = dtype or q.dtype
    qf, kf, vf = (t.to(dtype).float() for t in (q, k, v))
    r = qf.shape[-3] // kf.shape[-3] if qf.ndim >= 3 else 1
    if r > 1:
        kf, vf = kf.repeat_interleave(r, dim=-3), vf.repeat_interleave(r, dim=-3)
    s = (qf @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    L, S = s.shape[-2], s.shape[-1]
    i = torch.arange(L, device=q.device)[:, None]
    j = torch.arange(S, device=q.device)[None, :]
    if causal == "top_left":
        s = s.masked_fill(j > i, float("-inf"))
    elif causal == "bottom_right":
        s = s.masked_fill(j > i + (S - L), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p.to(dtype).float() @ vf


def within_rule(got, want64, naive_err, floor):
    """max|X − R| ≤ 2·(naive's max|N − R|) + floor; returns (ok, error, bound)."""
    err = float(np.abs(got.double().cpu().numpy() - want64).max()) if want64.size else 0.0
    bound = 2 * naive_err + floor
    return err <= bound and math.isfinite(err), err, bound


def check_forward(torch, q, k, v, causal="none", mask=None, **kw):
    out = qkv.attention(q, k, v, attn_mask=mask, is_causal=causal != "none",
                        causal_alignment=causal if causal != "none" else "top_left",
                        enable_gqa=q.shape[-3] != k.shape[-3] if q.ndim >= 3 else False, **kw)
    assert isinstance(out, torch.Tensor) and out.device == q.device and out.dtype == q.dtype
    assert out.shape == q.shape[:-1] + (v.shape[-1],)
    want, _ = reference64(q, k, v, causal, mask)
    n = naive(torch, q, k, v, causal, mask)
    naive_err = float(np.abs(n.double().cpu().numpy() - want).max()) if want.size else 0.0
    floor = 1e-6 if q.dtype == torch.float32 else 1e-3
    ok, err, bound = within_rule(out, want, naive_err, floor)
    assert ok, f"forward {q.dtype} {tuple(q.shape)} causal {causal}: {err:.3e} > {bound:.3e}"
    return out, err, bound


DTYPES = ["float32", "bfloat16", "float16"]


def rand(torch, shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(shape, device="cuda", generator=g).to(getattr(torch, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", ["none", "top_left", "bottom_right"])
@pytest.mark.parametrize("Hq, Hkv, L, S, D", [(2, 2, 129, 129, 64), (4, 2, 65, 200, 32),
                                              (8, 1, 1, 257, 128), (2, 2, 0, 5, 16)])
def test_forward_on_torch_cuda_tensors(torch, dtype, causal, Hq, Hkv, L, S, D):
    q = rand(torch, (2, Hq, L, D), dtype, 1)
    k, v = rand(torch, (2, Hkv, S, D), dtype, 2), rand(torch, (2, Hkv, S, D), dtype, 3)
    before = [t.clone() for t in (q, k, v)]
    check_forward(torch, q, k, v, causal)
    for a, b in zip((q, k, v), before):  # read in place, never written
        assert torch.equal(a, b)


def test_the_rule_rejects_a_perturbed_result(torch):
    q, k, v = (rand(torch, (1, 2, 64, 32), "float32", s) for s in (4, 5, 6))
    out = qkv.attention(q, k, v)
    want, _ = reference64(q, k, v)
    naive_err = float(np.abs(naive(torch, q, k, v).double().cpu().numpy() - want).max())
    assert within_rule(out, want, naive_err, 1e-6)[0]
    bad = out.clone()
    bad[0, 1, 7, 3] += 1e-4
    assert not within_rule(bad, want, naive_err, 1e-6)[0]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_masks_and_views_on_torch(torch, dtype):
    # q, k, v as views of [B, L, H, D] buffers (the projections' layout): rows contiguous,
    # heads strided; a bool mask broadcast over heads with a fully masked row; a float mask.
    B, H, L, S, D = 2, 4, 33, 47, 64
    q = rand(torch, (B, L, H, D), dtype, 7).transpose(1, 2)
    k = rand(torch, (B, S, H, D), dtype, 8).transpose(1, 2)
    v = rand(torch, (B, S, H, D), dtype, 9).transpose(1, 2)
    keep = torch.rand((B, 1, L, S), device="cuda") > 0.3
    keep[:, :, 5, :] = False
    out, _, _ = check_forward(torch, q, k, v, mask=keep)
    assert torch.all(out[:, :, 5, :] == 0)
    bias = torch.randn((L, S), device="cuda")
    check_forward(torch, q, k, v, mask=bias)


def test_a_side_stream_is_used(torch):
    q, k, v = (rand(torch, (1, 8, 512, 64), "bfloat16", s) for s in (10, 11, 12))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = qkv.attention(q, k, v, is_causal=True)
        again = out.float() * 1  # ordered after qkv's work on s
    torch.cuda.current_stream().wait_stream(s)
    want, _ = reference64(q, k, v, "top_left")
    assert np.abs(again.double().cpu().numpy() - want).max() < 5e-2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", ["none", "top_left"])
def test_backward_on_torch_cuda_tensors(torch, dtype, causal):
    Hq, Hkv, L, S, D = 4, 2, 97, 130, 64
    q = rand(torch, (1, Hq, L, D), dtype, 13)
    k, v = rand(torch, (1, Hkv, S, D), dtype, 14), rand(torch, (1, Hkv, S, D), dtype, 15)
    dout = rand(torch, (1, Hq, L, D), dtype, 16)
    g = qkv.attention_backward(dout, q, k, v, is_causal=causal != "none", enable_gqa=True)
    for name, t, like in (("dq", g.dq, q), ("dk", g.dk, k), ("dv", g.dv, v)):
        assert isinstance(t, torch.Tensor) and t.shape == like.shape and t.dtype == like.dtype
    assert g.dscale is None

    # float64 gradients through autograd on the CPU, and a naive same-dtype one on the GPU.
    def grads(cast, device, naive_dtype=None):
        xs = [t.detach().to(device=device, dtype=cast).requires_grad_() for t in (q, k, v)]
        if naive_dtype is None:
            r = Hq // Hkv
            kk, vv = xs[1].repeat_interleave(r, 1), xs[2].repeat_interleave(r, 1)
            s = xs[0] @ kk.transpose(-1, -2) / math.sqrt(D)
            if causal != "none":
                s = s.masked_fill(torch.ones(L, S, dtype=torch.bool, device=device).triu(1),
                                  float("-inf"))
            o = torch.softmax(s, -1) @ vv
        else:
            o = naive(torch, *xs, causal, dtype=naive_dtype)
        o.backward(dout.to(device=device, dtype=o.dtype))
        return [x.grad.double().cpu().numpy() for x in xs]

    want = grads(torch.float64, "cpu")
    n = grads(torch.float32, "cuda", naive_dtype=q.dtype)
    floor = 1e-5 if dtype == "float32" else 2e-3
    for name, got, w, nn in zip(("dq", "dk", "dv"), (g.dq, g.dk, g.dv), want, n):
        ok, err, bound = within_rule(got, w, float(np.abs(nn - w).max()), floor)
        assert ok, f"{name} {dtype} causal {causal}: {err:.3e} > {bound:.3e}"

    # The saved forward gives the same bits; the backward is deterministic.
    out, saved = qkv.attention(q, k, v, is_causal=causal != "none", enable_gqa=True,
                               keep_for_backward=True)
    assert saved.logsumexp.dtype == torch.float32 and saved.logsumexp.shape == q.shape[:-1]
    g2 = qkv.attention_backward(dout, q, k, v, is_causal=causal != "none", enable_gqa=True,
                                saved=saved)
    for a, b in ((g.dq, g2.dq), (g.dk, g2.dk), (g.dv, g2.dv)):
        assert torch.equal(a, b)


def test_cupy_arrays_return_cupy_arrays(torch):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    rng = np.random.default_rng(17)
    q, k, v = (cupy.asarray(rng.standard_normal((1, 2, 50, 32)).astype(np.float32))
               for _ in range(3))
    out = qkv.attention(q, k, v)
    assert isinstance(out, cupy.ndarray) and out.dtype == np.float32 and out.shape == q.shape
    want = ref.reference(*(cupy.asnumpy(t) for t in (q, k, v)))[0]
    assert np.abs(cupy.asnumpy(out) - want).max() < 1e-5
