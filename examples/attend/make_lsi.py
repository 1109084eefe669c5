#!/usr/bin/python3
"""Writes examples/attend/lsi.json, the worked example `qkv attend --example lsi`, and prints the
numbers tests/cli/attend_examples_test.cpp asserts.

Latent semantic indexing (Deerwester et al. 1990) on the seeds' 7 x 5 user-movie matrix: the
rank-2 SVD X ~ U_k S_k V_k^T maps a user's ratings r to concept coordinates r V_k S_k^-1 (the
"folding-in" of a new row; the rows of U_k are the existing users' own coordinates). Cosine
similarity there is attention's cosine score with W_Q = W_K = V_k S_k^-1. The SVD is computed here,
with NumPy, so the C++ side needs no linear algebra: it reads W from the JSON.

Run from the repository root: /usr/bin/python3 examples/attend/make_lsi.py
With --check it writes nothing and exits 1 when lsi.json differs from what it would write (a ctest,
golden.lsi_example_is_current, so that the JSON cannot drift from the SVD that explains it).
"""
import json
import pathlib
import sys

import numpy as np

MOVIES = ["StarWars", "Matrix", "IronMan", "UGotMail", "Titanic"]
# Users P1-P4 like science fiction, P5-P7 romance (P5 and P7 watched The Matrix too).
X = np.array(
    [
        [1, 1, 1, 0, 0],
        [3, 3, 3, 0, 0],
        [4, 4, 4, 0, 0],
        [5, 5, 5, 0, 0],
        [0, 2, 0, 4, 4],
        [0, 0, 0, 5, 5],
        [0, 1, 0, 2, 2],
    ],
    dtype=float,
)
# New users: P8 saw only Star Wars, P9 only The Matrix and Iron Man: no movie in common, so their
# raw cosine is 0, yet both are science-fiction fans.
P = np.array([[5, 0, 0, 0, 0], [0, 4, 5, 0, 0]], dtype=float)
K = 2
TAU = 0.2  # temperature: cosines lie in [-1, 1], so softmax needs scale 1/tau to be decisive

U, s, Vt = np.linalg.svd(X, full_matrices=False)
V_k = Vt[:K].T.copy()
# An SVD fixes each singular vector only up to its sign; make each column's largest entry
# positive so that the JSON does not depend on the LAPACK build.
for j in range(K):
    if V_k[np.argmax(np.abs(V_k[:, j])), j] < 0:
        V_k[:, j] = -V_k[:, j]
W = V_k / s[:K]  # V_k S_k^-1, [5, 2]
SWAP = np.array([[0.0, 1.0], [1.0, 0.0]])  # concept 1 <-> concept 2


def cosine(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return a @ b.T


def rows(m):
    return [[float(x) for x in row] for row in m]


runs = [
    {
        "caption": "Raw ratings, cosine: P8 shares 1 of 3 movies with P1-P4 (0.58), none with P9",
        "x_q": P,
        "x_k": X,
    },
    {
        "caption": "LSI, W_Q = W_K = V_k S_k^-1 (rank 2): in concept space P8 is like P1-P4 (0.99)",
        "x_q": P,
        "x_k": X,
        "w_q": W,
        "w_k": W,
    },
    {
        "caption": "Two matrices: W_Q swaps the two concepts, W_K as before: sci-fi fans find romance"
        " fans",
        "x_q": P,
        "x_k": X,
        "w_q": W @ SWAP,
        "w_k": W,
    },
]
example = {
    "name": "lsi",
    "title": "Latent semantic indexing: cosine in SVD concept space is attention with W_Q = W_K",
    "story": [
        "Users P1-P7 rated 5 movies (X, 7 x 5); new users P8, P9 are the queries, P1-P7 the keys",
        "and their ratings the values (out: predicted ratings). Rank-2 SVD: X ~ U_k S_k V_k^T.",
    ],
    "query_labels": ["P8", "P9"],
    "key_labels": [f"P{i}" for i in range(1, 8)],
    "input_columns": MOVIES,
    "value_columns": MOVIES,
    "runs": [
        {
            "caption": r["caption"],
            "score": "cosine",
            "scale": 1 / TAU,
            **{name: rows(m) for name, m in r.items() if name != "caption"},
        }
        for r in runs
    ],
    "takeaway": "LSI folds a user into concept space with r V_k S_k^-1 and compares by cosine:"
    " that is attention's cosine score (here x 5, temperature 0.2) with one matrix W_Q = W_K ="
    " V_k S_k^-1. There P8 and P9, who share no movie (cosine 0), are 0.99 alike, and both match"
    " P1-P4 at 0.99 instead of 0.58 and 0.81. One shared matrix can only"
    " ask \"who is like me?\" (the score is symmetric); attention learns W_Q and W_K separately, so"
    " a query can ask for something else (run 3: sci-fi fans matched to romance fans).",
}

path = pathlib.Path(__file__).with_name("lsi.json")
text = json.dumps(example, indent=2, ensure_ascii=False) + "\n"
if "--check" in sys.argv[1:]:
    # Equal up to float rounding: another LAPACK may differ in the last bits of the SVD.
    def close(a, b):
        if isinstance(a, float) or isinstance(b, float):
            return abs(a - b) <= 1e-12 * max(1.0, abs(a))
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
        return a == b

    if not close(json.loads(path.read_text()), example):
        sys.exit(f"{path} is out of date; expected what make_lsi.py writes (run it to regenerate)")
    print(f"{path.name} is current")
    sys.exit(0)
path.write_text(text)

np.set_printoptions(precision=6, suppress=True)
print("singular values", s)
print("W = V_k S_k^-1\n", W)
print("P8, P9 in concept space\n", P @ W)
for name, w_q in [("raw", None), ("lsi", W), ("two projections", W @ SWAP)]:
    c = cosine(P, X) if w_q is None else cosine(P @ w_q, X @ W)
    weights = np.exp(c / TAU)
    weights /= weights.sum(axis=1, keepdims=True)
    print(name, "cosine\n", c, "\nweights\n", weights, "\nout\n", weights @ X)
print("cos(P8, P9) raw", cosine(P[:1], P[1:])[0, 0], "concept", cosine(P[:1] @ W, P[1:] @ W)[0, 0])
