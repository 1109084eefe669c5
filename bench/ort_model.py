"""ONNX Runtime's all-MiniLM-L6-v2, for `compare_torch.py model`: the same weights as
sentence-transformers', exported once with torch.onnx, run by ONNX Runtime's CPU provider, with
sentence-transformers' tokenizer, mean pooling and normalization around it.

The export goes to $QKV_HOME/onnx (default ~/.cache/qkv/onnx), outside the repo, under a name that
carries the weights' hash and the torch version, and is reused by later runs. It is TorchScript
export (dynamo=False) of the BertModel sentence-transformers loaded, with batch and sequence
dynamic: the graph that Optimum-style exports (what fastembed and most CPU deployments run) have,
whose LayerNorm, GELU and MatMul+Add patterns ONNX Runtime's own graph optimizations fuse.
"""

import hashlib
import os
import time
import warnings
from pathlib import Path

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OPSET = 17  # the first with LayerNormalization as one node


def cache_dir():
    home = os.environ.get("QKV_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "qkv")
    return Path(home) / "onnx"


def weights_hash(model_dir):
    h = hashlib.sha256()
    with open(Path(model_dir) / "model.safetensors", "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def export(st, model_dir, torch, log):
    """The ONNX file of st's transformer, exported now or found from an earlier run."""
    path = cache_dir() / (f"all-MiniLM-L6-v2-{weights_hash(model_dir)}-"
                          f"torch{torch.__version__.split('+')[0]}-opset{OPSET}.onnx")
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    bert = st[0].auto_model.eval()

    class Encoder(torch.nn.Module):
        """BertModel by keyword (its positional order changes between transformers versions)."""

        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids).last_hidden_state

    example = st.tokenizer(["an example", "a longer example sentence"], padding=True,
                           return_tensors="pt")
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    log(f"exporting the model to ONNX (torch.onnx, once): {path}")
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(Encoder(), tuple(example[n] for n in INPUTS), str(tmp),
                              input_names=list(INPUTS), output_names=["last_hidden_state"],
                              dynamic_axes={n: {0: "batch", 1: "sequence"}
                                            for n in (*INPUTS, "last_hidden_state")},
                              opset_version=OPSET, dynamo=False)
        os.replace(tmp, path)  # never a partial file under the final name
    finally:
        tmp.unlink(missing_ok=True)
    log(f"  exported in {time.perf_counter() - t0:.1f} s")
    return path


class OrtEncoder:
    """Texts → unit-length sentence embeddings through an ONNX Runtime session.

    As sentence-transformers' encode: the fast tokenizer (truncation to max_length), batches of
    texts of similar length padded to their longest, the mean of the last hidden states over the
    real tokens, then x / max(‖x‖, 1e-12). The texts are sorted by token count, longest first,
    the order qkv runs them in (sentence-transformers sorts by characters, a little more padding).
    """

    def __init__(self, path, tokenizer, max_length, threads):
        import onnxruntime as ort

        self.ort = ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer
        self.max_length = max_length

    @property
    def version(self):
        return self.ort.__version__

    def encode(self, texts, batch_size):
        import numpy as np

        ids = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # stable: ties keep order
        out = None
        for begin in range(0, len(order), batch_size):
            rows = order[begin:begin + batch_size]
            length = len(ids[rows[0]])
            input_ids = np.zeros((len(rows), length), np.int64)
            mask = np.zeros((len(rows), length), np.int64)
            for r, i in enumerate(rows):
                input_ids[r, :len(ids[i])] = ids[i]
                mask[r, :len(ids[i])] = 1
            hidden = self.session.run(None, {"input_ids": input_ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(input_ids)})[0]
            m = mask[:, :, None].astype(np.float32)
            mean = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            norm = np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
            if out is None:
                out = np.empty((len(ids), mean.shape[1]), np.float32)
            out[rows] = mean / norm
        return out
