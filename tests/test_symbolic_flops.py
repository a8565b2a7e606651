"""The matmul FLOP counts of book/flops are counted from SymPy's entries, not typed."""

import sympy as sp

from tmath import einsum_flops
from tmath.symbolic import entry_ops, matmul_training_flops, matmul_training_products, product_ops

d1, d2, d3 = sp.symbols("d_1 d_2 d_3", positive=True, integer=True)


def test_gradients_are_derived():
    p = matmul_training_products(d1, d2, d3)
    A, B, G = (sp.MatrixSymbol(n, *s) for n, s in (("A", (d1, d2)), ("B", (d2, d3)), ("G", (d1, d3))))
    assert p["grad_A"] == G * B.T and p["grad_B"] == A.T * G


def test_two_plus_two_plus_two():
    f = matmul_training_flops(d1, d2, d3)
    for k in ("forward", "grad_A", "grad_B"):
        assert f[k] == 2 * d1 * d2 * d3
    assert f["total"] == 6 * d1 * d2 * d3


def test_explicit_matrix_agrees_with_symbolic_and_einsum():
    n, p, m = 2, 3, 4
    A = sp.Matrix(n, p, lambda i, j: sp.Symbol(f"a_{i}{j}"))
    B = sp.Matrix(p, m, lambda i, j: sp.Symbol(f"b_{i}{j}"))
    c = product_ops(A * B)
    assert c == {"entries": n * m, "terms": p, "muls": n * m * p, "adds": n * m * (p - 1),
                 "flops": 2 * n * p * m}
    sym = product_ops(sp.MatrixSymbol("A", d1, d2) * sp.MatrixSymbol("B", d2, d3))
    assert {k: v.subs({d1: n, d2: p, d3: m}) for k, v in sym.items()} == c
    assert c["flops"] == einsum_flops("ij,jk->ik", (n, p), (p, m))


def test_entry_ops_fails_on_wrong_counts():
    a, b, c = sp.symbols("a b c")
    assert entry_ops(a * b + c) == (2, 1, 1)
    assert entry_ops(a * (b + c)) == (2, 2, 1)  # expanded: a*b + a*c
    assert entry_ops(a * b + c) != (1, 1, 0)
