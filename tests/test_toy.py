"""tmath.toy: the hand-written backward pass is the gradient, and the head really learns."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tmath import toy


def test_backward_matches_finite_differences():
    p = toy.init_params(5, 4, 6, 3, seed=1)
    ids = np.random.default_rng(2).integers(0, 5, (3, 4))
    _, grads = toy.loss_and_grads(p, ids)
    h = 1e-6
    for name, a in p.arrays().items():
        for idx in np.ndindex(a.shape):
            old = a[idx]
            a[idx] = old + h
            up, _ = toy.loss_and_grads(p, ids)
            a[idx] = old - h
            down, _ = toy.loss_and_grads(p, ids)
            a[idx] = old
            assert abs((up - down) / (2 * h) - grads[name][idx]) < 1e-7, (name, idx)


def test_training_learns_a_previous_token_head():
    r = toy.train_previous_token()
    assert r.losses[0] > 0.9 * math.log(r.vocab_size)
    test = np.random.default_rng(99).integers(0, r.vocab_size, (128, r.seq_len))
    loss, _ = toy.loss_and_grads(r.params, test)
    assert loss < 0.01 * r.chance_loss
    assert toy.previous_token_weight(toy.forward(r.params, test)["A"]) > 0.95
    assert toy.previous_token_weight(toy.forward(r.initial, test)["A"]) < 0.5


def test_attention_rows_are_causal_distributions():
    r = toy.train_previous_token(steps=5)
    out = toy.forward(r.params, np.arange(8) % r.vocab_size)
    assert out["P"] is out["A"]  # the book's letter for the softmax weights
    A = out["P"][0]
    assert np.allclose(A.sum(-1), 1) and np.all(np.triu(A, 1) == 0)


def test_bad_input_is_refused_with_the_reason():
    p = toy.init_params(4, 3, 2, 2)
    with pytest.raises(ValueError, match="exceeds the 3 positions"):
        toy.forward(p, [0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"lie in \[0, 4\)"):
        toy.forward(p, [0, 9])
    with pytest.raises(ValueError, match="d_model must be a positive int"):
        toy.init_params(4, 3, 0, 2)
