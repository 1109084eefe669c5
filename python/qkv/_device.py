"""CUDA arrays in qkv.attention and qkv.attention_backward (issue 32): arrays that live on an
NVIDIA GPU — PyTorch's CUDA tensors, anything with __cuda_array_interface__ (CuPy, Numba) or with
__dlpack__ on a CUDA device (JAX) — are read where they lie, without copies, and the results are
new arrays of the same library on the same device, written there by qkv's GPU kernels
(qkv::attention(DeviceAttention), Path::cuda) on the array's current stream.

Neither torch nor cupy is a dependency: a torch tensor can only reach here if torch is imported
already (sys.modules), and CuPy or Numba are imported only to allocate the outputs of their own
arrays."""

import sys
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _qkv

# DLPack's device types (dlpack.h, DLDeviceType): the ones qkv reads as device memory. CUDA host
# (pinned) memory (3) is host memory to qkv: NumPy reads it.
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
_DL_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
             10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi",
             15: "webgpu", 16: "hexagon", 17: "maia"}
_DL_DEVICE_MEMORY = (DL_CUDA, DL_CUDA_MANAGED)

# __cuda_array_interface__'s typestr (NumPy's array-interface codes) → qkv's names. bfloat16 has
# no typestr of its own there (ml_dtypes exports it as the opaque '<V2'): such arrays come through
# DLPack or as torch tensors.
_TYPESTR = {"<f4": "float32", "<f2": "float16", "|b1": "bool", "<b1": "bool"}
_ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "bool": 1}
FLOAT_DTYPES = ("float32", "bfloat16", "float16")


class DeviceView(NamedTuple):
    """What qkv::DeviceTensor is made of, read off one CUDA array."""
    ptr: int
    dtype: str  # float32, bfloat16, float16 or bool (else the library's own name, refused later)
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # in elements
    device: Optional[int]  # the CUDA device's ordinal, where the array says
    kind: str  # torch, cupy, numba, jax, cuda_array_interface or dlpack: who allocates results
    stream: int  # a cudaStream_t as an int: the array's library's current stream (0: default)
    obj: Any  # the array: alive as long as the view

    def arg(self):
        """(pointer, dtype, shape, strides): the extension's device_attention takes these."""
        return (self.ptr, self.dtype, list(self.shape), list(self.strides))

    def where(self):
        return f"cuda:{self.device}" if self.device is not None else "a CUDA device"


def _torch_tensor(x):
    """x if it is a torch.Tensor; torch is only looked up if someone imported it already."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _interface(x):
    """x.__cuda_array_interface__, or None. Looked up on the type first: a property that raises
    (PyTorch's, for a tensor that requires grad) must not end the detection."""
    if not hasattr(type(x), "__cuda_array_interface__") and \
            "__cuda_array_interface__" not in getattr(x, "__dict__", {}):
        return None
    try:
        return x.__cuda_array_interface__
    except Exception:  # the producer refuses to export: not an array we can read
        return None


def _dlpack_device(x):
    """x.__dlpack_device__() as (device type, id), or None."""
    f = getattr(type(x), "__dlpack_device__", None)
    if f is None or not hasattr(type(x), "__dlpack__"):
        return None
    try:
        device_type, device_id = x.__dlpack_device__()
        return int(device_type), int(device_id)
    except Exception:
        return None


def is_device(x) -> bool:
    """Whether x is an array in CUDA device memory (the GPU path), not one NumPy can read."""
    if x is None or isinstance(x, (np.ndarray, np.generic, list, tuple, int, float, bool)):
        return False
    if _torch_tensor(x):
        return x.device.type == "cuda"
    if _interface(x) is not None:
        return True
    d = _dlpack_device(x)
    return d is not None and d[0] in _DL_DEVICE_MEMORY


def where(x) -> str:
    """"cuda:0 (torch.Tensor)", "the host (numpy.ndarray)": for the message of a mixed call."""
    kind = f"{type(x).__module__.split('.')[0]}.{type(x).__name__}" \
        if type(x).__module__ != "builtins" else type(x).__name__
    if not is_device(x):
        d = _dlpack_device(x)
        if d is not None and d[0] not in (DL_CPU, DL_CUDA_HOST):
            return f"{_DL_NAMES.get(d[0], f'DLPack device type {d[0]}')}:{d[1]} ({kind})"
        return f"the host ({kind})"
    device = None
    if _torch_tensor(x):
        device = x.device.index
    else:
        device = getattr(getattr(x, "device", None), "id", None)
        d = _dlpack_device(x)
        if device is None and d is not None:
            device = d[1]
    return (f"cuda:{device}" if device is not None else "a CUDA device") + f" ({kind})"


def contiguous_strides(shape) -> Tuple[int, ...]:
    """Row-major strides in elements."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def element_strides(byte_strides, shape, itemsize: int, name: str) -> Tuple[int, ...]:
    """__cuda_array_interface__'s strides (bytes, or None for row-major) in elements. A stride that
    is not a whole number of elements cannot be a DeviceTensor's: ValueError."""
    if byte_strides is None:
        return contiguous_strides(shape)
    if len(byte_strides) != len(shape):
        raise ValueError(f"{name}: {len(byte_strides)} strides for {len(shape)} dimensions in its "
                         "__cuda_array_interface__")
    out = []
    for i, s in enumerate(byte_strides):
        s = int(s)
        if s % itemsize:
            raise ValueError(f"{name}: stride {s} bytes in dimension {i} is not a whole number of "
                             f"{itemsize}-byte elements; expected an aligned array (make a "
                             "contiguous copy)")
        out.append(s // itemsize)
    return tuple(out)


_TORCH_DTYPES = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16",
                 "bool": "bool"}


def _torch_view(x, name):
    torch = sys.modules["torch"]
    dtype = str(x.dtype).replace("torch.", "")
    if x.layout != torch.strided:
        raise TypeError(f"{name}: a {x.layout} torch tensor; expected a strided (dense) one")
    stream = torch.cuda.current_stream(x.device).cuda_stream
    return DeviceView(int(x.data_ptr()), _TORCH_DTYPES.get(dtype, dtype), tuple(x.shape),
                      tuple(x.stride()), x.device.index, "torch", int(stream), x)


def _interface_view(x, d, name):
    module = type(x).__module__.split(".")[0]
    kind = module if module in ("cupy", "numba") else "cuda_array_interface"
    typestr = d.get("typestr", "?")
    dtype = _TYPESTR.get(typestr)
    if dtype is None:
        hint = (" (bfloat16 has no __cuda_array_interface__ typestr: pass a torch tensor or a "
                "DLPack array)" if typestr in ("<V2", "|V2") else "")
        raise TypeError(f"{name}: a CUDA array of typestr {typestr!r}{hint}; expected "
                        "float32 ('<f4'), float16 ('<f2') or bool ('|b1')")
    if d.get("mask") is not None:
        raise ValueError(f"{name}: a masked CUDA array (its __cuda_array_interface__ has a mask); "
                         "expected a plain one")
    shape = tuple(int(n) for n in d["shape"])
    strides = element_strides(d.get("strides"), shape, _ITEMSIZE[dtype], name)
    ptr = int(d["data"][0] or 0)
    device = getattr(getattr(x, "device", None), "id", None)
    if kind == "cupy":
        cupy = sys.modules.get("cupy") or __import__("cupy")
        stream = cupy.cuda.get_current_stream().ptr
    else:
        # Version 3's stream: the producer's work is ordered on it, so qkv's is too. None: no
        # ordering needed; 1 and 2 are cudaStreamLegacy and cudaStreamPerThread, which the CUDA
        # runtime takes as stream handles just as they are.
        stream = d.get("stream") or 0
    return DeviceView(ptr, dtype, shape, strides, device, kind, int(stream), x)


def _dlpack_view(x, name):
    ptr, dtype, shape, strides, device_type, device_id = _qkv._dlpack_view(x)
    module = type(x).__module__.split(".")[0]
    kind = "jax" if module in ("jax", "jaxlib") else "dlpack"
    return DeviceView(int(ptr), dtype, tuple(shape), tuple(strides), int(device_id), kind, 0, x)


def view(x, name: str, dtypes=FLOAT_DTYPES) -> DeviceView:
    """The device view of the CUDA array x (is_device(x) is true), its dtype one of `dtypes`;
    TypeError or ValueError naming `name` otherwise."""
    if _torch_tensor(x):
        v = _torch_view(x, name)
    else:
        d = _interface(x)
        v = _interface_view(x, d, name) if d is not None else _dlpack_view(x, name)
    if v.dtype not in dtypes:
        raise TypeError(f"{name}: a {v.dtype} CUDA array; expected " + _listed(dtypes))
    if any(s < 0 for s in v.strides):
        raise ValueError(f"{name}: negative strides {list(v.strides)}; expected a view with "
                         "non-negative strides (make a contiguous copy)")
    return v


def _listed(names):
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def require_rows(v: DeviceView, name: str):
    """The GPU kernels read each row of q, k, v and dout as contiguous elements."""
    if v.shape and v.shape[-1] > 1 and v.strides[-1] != 1:
        raise ValueError(f"{name}: its last dimension has stride {v.strides[-1]} elements; the GPU "
                         "kernels read rows contiguously: expected stride 1 (pass a contiguous "
                         "copy, e.g. x.contiguous())")


def require_gpu(first: DeviceView, name: str):
    """RuntimeError, one line, where this build has no CUDA or this machine no GPU."""
    built, present, description = _qkv.cuda_device()
    if not (built and present):
        raise RuntimeError(f"{name} is a CUDA array ({type(first.obj).__name__} on "
                           f"{first.where()}), but {description}")


# ---- the results: new arrays of the inputs' library, on their device ----

def _np_dtype(dtype):
    return {"float32": np.float32, "float16": np.float16, "bool": np.bool_}[dtype]


def empty(like: DeviceView, shape, dtype: str):
    """A new uninitialized array of `like`'s library on its device: (the array, its view)."""
    shape = tuple(int(n) for n in shape)
    kind = like.kind
    if kind == "torch":
        torch = sys.modules["torch"]
        a = torch.empty(shape, device=like.obj.device, dtype=getattr(torch, dtype))
    elif kind == "cupy":
        import cupy
        with cupy.cuda.Device(like.device if like.device is not None else
                              cupy.cuda.runtime.getDevice()):
            a = cupy.empty(shape, dtype=_np_dtype(dtype))
    elif kind == "numba":
        from numba import cuda
        a = cuda.device_array(shape, dtype=_np_dtype(dtype))
    else:
        # JAX's arrays are immutable, and a bare __cuda_array_interface__ or DLPack producer has
        # no allocator we know: the results are made by torch (else CuPy) and, for JAX, handed
        # over through DLPack after the call (finish()).
        a = _fallback_empty(like, shape, dtype)
    return a, view(a, "the result", dtypes=(dtype,))


def _fallback_empty(like, shape, dtype):
    try:
        import torch
        if torch.cuda.is_available():
            device = torch.device("cuda", like.device if like.device is not None else
                                  torch.cuda.current_device())
            return torch.empty(shape, device=device, dtype=getattr(torch, dtype))
    except ImportError:
        pass
    try:
        import cupy
        if dtype == "bfloat16":
            raise TypeError("the results of bfloat16 arrays from " + type(like.obj).__name__ +
                            " need torch to allocate them (CuPy has no bfloat16)")
        return cupy.empty(shape, dtype=_np_dtype(dtype))
    except ImportError:
        raise TypeError(f"{type(like.obj).__name__} arrays: qkv allocates their results with "
                        "torch or CuPy, and neither is installed; expected torch tensors or CuPy "
                        "arrays") from None


def finish(like: DeviceView, arrays):
    """The results in the inputs' own kind: JAX's through DLPack, after the GPU's work is done
    (JAX orders nothing after qkv's stream). Others as they are."""
    if like.kind != "jax":
        return arrays
    import jax.dlpack
    _synchronize(arrays)
    return [None if a is None else jax.dlpack.from_dlpack(a) for a in arrays]


def _synchronize(arrays):
    for a in arrays:
        if a is None:
            continue
        if _torch_tensor(a):
            sys.modules["torch"].cuda.synchronize(a.device)
        else:
            import cupy
            cupy.cuda.runtime.deviceSynchronize()
        return


def prepare_inputs(arrays):
    """JAX computes asynchronously on streams of its own: its inputs are made ready first."""
    for v in arrays:
        if v is not None and v.kind == "jax":
            v.obj.block_until_ready()


# ---- the calls ----

class DeviceFingerprint(NamedTuple):
    """What a forward on the GPU was computed from, as far as can be told without reading device
    memory: each input's address, dtype, shape and strides, and the options. A backward refuses
    the saved forward of other arrays or options; an array changed in place since goes unseen
    (the host path hashes values; this one cannot without a pass over device memory)."""
    inputs: tuple
    options: tuple


def fingerprint(views, options) -> DeviceFingerprint:
    return DeviceFingerprint(tuple(None if v is None else (v.ptr, v.dtype, v.shape, v.strides)
                                   for v in views), tuple(options))


def check_shapes(q: DeviceView, k: DeviceView, v: DeviceView, enable_gqa: bool):
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"query, key and value have dtypes {q.dtype}, {k.dtype}, {v.dtype}; "
                        "expected one dtype (as PyTorch's scaled_dot_product_attention)")
    for name, a in (("query", q), ("key", k), ("value", v)):
        if not 2 <= len(a.shape) <= 4:
            raise ValueError(f"{name}: {len(a.shape)} dimensions {a.shape}; expected 2 to 4: "
                             "(L, E), (H, L, E) or (N, H, L, E)")
        require_rows(a, name)
    if len(q.shape) >= 3 and len(k.shape) >= 3 and not enable_gqa and q.shape[-3] != k.shape[-3]:
        raise ValueError(f"query has {q.shape[-3]} heads, key {k.shape[-3]}; pass "
                         "enable_gqa=True for grouped-query attention (as PyTorch)")
    devices = {a.device for a in (q, k, v) if a.device is not None}
    if len(devices) > 1:
        raise ValueError("query, key and value are on devices " +
                         ", ".join(f"cuda:{d}" for d in sorted(devices)) + "; expected one")


def refuse_host_only(path, need_weights, params, score, normalize):
    """The options the GPU path does not have, refused before anything runs (ValueError)."""
    if path not in ("auto", "cuda"):
        raise ValueError(f"path {path!r} runs on the CPU, and these are CUDA arrays; expected "
                         "path 'auto' or 'cuda' (or host arrays)")
    if need_weights:
        raise ValueError("need_weights=True with CUDA arrays: the GPU kernels never form the "
                         "L×S weights; expected need_weights=False (or host arrays)")
    if params:
        raise ValueError("params with CUDA arrays: the GPU runs score scaled_dot or dot only; "
                         "expected no params (or host arrays)")
    if score not in ("scaled_dot", "scaled-dot", "dot"):
        raise ValueError(f"score {score!r} with CUDA arrays; the GPU runs scaled_dot or dot "
                         "(pass host arrays for the others)")
    if normalize != "softmax":
        raise ValueError(f"normalize {normalize!r} with CUDA arrays; the GPU runs softmax only "
                         "(pass host arrays for the others)")


def mask_view(attn_mask, is_causal: bool):
    """attn_mask's view: bool (True: may attend) or float32 added to the logits, on any inputs'
    dtype (the kernels hold the mask in float32)."""
    if attn_mask is None:
        return None
    if is_causal:
        raise ValueError("attn_mask and is_causal=True together; expected one of them "
                         "(as PyTorch's scaled_dot_product_attention)")
    return view(attn_mask, "attn_mask", dtypes=("bool", "float32"))


def run_forward(q, k, v, m, causal, scale, score, precision, need_lse):
    """Allocates out (q's dtype, [..., L, Ev]) and, where asked, logsumexp (float32, [..., L]),
    and queues the forward on q's stream: (out, out's view, lse or None, its view or None)."""
    out, out_v = empty(q, q.shape[:-1] + (v.shape[-1],), q.dtype)
    lse, lse_v = empty(q, q.shape[:-1], "float32") if need_lse else (None, None)
    _qkv.device_attention(q.arg(), k.arg(), v.arg(), None if m is None else m.arg(), out_v.arg(),
                          None if lse_v is None else lse_v.arg(), causal, scale, score,
                          "softmax", precision, q.stream)
    return out, out_v, lse, lse_v


def split(named):
    """Whether the arrays (name, array) are CUDA arrays (True) or host arrays (False); None entries
    are skipped. A mix is a ValueError that says which is where."""
    present = [(name, x) for name, x in named if x is not None]
    flags = [is_device(x) for _, x in present]
    if not any(flags):
        return False
    if all(flags):
        return True
    groups = {}
    for (name, x), _ in zip(present, flags):
        groups.setdefault(where(x), []).append(name)
    parts = [f"{_and(names)} {'is' if len(names) == 1 else 'are'} on {place}"
             for place, names in groups.items()]
    raise ValueError("; ".join(parts) + f"; expected {_and([n for n, _ in present])} all on one "
                     "CUDA device or all on the host (move them with .cuda(), cupy.asarray(...) "
                     "or .cpu())")


def _and(names):
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def difference(saved: Any, now: DeviceFingerprint) -> str:
    """How a saved forward's fingerprint differs from this call's: "another key (its address,
    dtype, shape or strides)", "other options (causal, scale, score, precision)"."""
    if not isinstance(saved, DeviceFingerprint):
        return "something else (no fingerprint of CUDA arrays)"
    names = ("query", "key", "value", "attn_mask")
    parts = [f"another {name}" for name, a, b in zip(names, saved.inputs, now.inputs) if a != b]
    labels = ("causal", "scale", "score", "precision")
    parts += [f"{label} {a!r}, not {b!r}" for label, a, b in zip(labels, saved.options,
                                                                  now.options) if a != b]
    return ", ".join(parts) if parts else "something else"
