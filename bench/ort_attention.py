"""ONNX Runtime's attention, for `compare_torch.py`: torch's scaled_dot_product_attention exported
with torch.onnx (TorchScript export, dynamo=False, opset 17) for each case's shapes and run by
ONNX Runtime's CPU provider, forward only (ONNX Runtime is an inference engine).

The exported graph is what an exported model holds: MatMul, the scale, the causal mask where
there is one, Softmax, MatMul, with the grouped heads repeated where Hq > Hkv — ONNX Runtime then
fuses what its graph optimizations (ORT_ENABLE_ALL) find. The files go to a temporary folder
the caller owns; nothing is written into the repository.
"""

import os
import statistics
import time
import warnings

OPSET = 17


def export(torch, case, folder):
    """The ONNX file of SDPA for one case's shapes (B, Hq, Hkv, L, S, D, causal)."""
    name, B, Hq, Hkv, L, S, D, causal = case
    F = torch.nn.functional

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v):
            if Hq != Hkv:  # the grouped heads, as exported models spell them
                k = k.repeat_interleave(Hq // Hkv, dim=1)
                v = v.repeat_interleave(Hq // Hkv, dim=1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    example = (torch.zeros(B, Hq, L, D), torch.zeros(B, Hkv, S, D), torch.zeros(B, Hkv, S, D))
    path = os.path.join(folder, f"sdpa-{name}.onnx")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Sdpa(), example, path, input_names=["q", "k", "v"],
                          output_names=["out"], opset_version=OPSET, dynamo=False)
    return path


def session(path, threads):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def time_case(torch, case, repeats, threads, folder, flops):
    """ORT's forward GFLOP/s (median of repeats after one warm-up), checked against torch's SDPA on
    the same inputs (max |ORT − torch| / max |torch|, which must be float32 rounding)."""
    import numpy as np

    name, B, Hq, Hkv, L, S, D, causal = case
    sess = session(export(torch, case, folder), threads)
    g = np.random.default_rng(7)
    q = g.standard_normal((B, Hq, L, D), dtype=np.float32)
    k = g.standard_normal((B, Hkv, S, D), dtype=np.float32)
    v = g.standard_normal((B, Hkv, S, D), dtype=np.float32)
    feed = {"q": q, "k": k, "v": v}
    times, out = [], None
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        out = sess.run(None, feed)[0]
        if i:  # the first is the warm-up
            times.append(time.perf_counter() - t0)
    with torch.inference_mode():
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        if Hq != Hkv:
            tk, tv = (x.repeat_interleave(Hq // Hkv, dim=1) for x in (tk, tv))
        want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
        want = want.numpy()
    err = float(np.abs(out - want).max() / (np.abs(want).max() + 1e-30))
    t = statistics.median(times)
    return {"ort_fwd_ms": t * 1e3, "ort_fwd_gflops": flops / t / 1e9, "ort_vs_torch": err}
