#!/usr/bin/env python3
"""Regenerate crates/stowage/tests/fixtures/autograd_mlp.pt (and its .pt.json):
PyTorch's own gradients, which crates/stowage/tests/autograd.rs
(`gradients_match_pytorch`) holds stowage's backward pass to.

usage: make_autograd_fixture.py [--out DIR]
Run it with the python that scripts/torch-venv.sh prints (it needs real torch).

What it writes (the maker is `make_autograd_mlp` in make_fixtures.py, one of
the fixtures that script regenerates; this is the same as
`make_fixtures.py autograd_mlp`):
  a 3 -> 5 -> 2 relu network in float64 on fixed data,
    x  = randn(6, 3), seed 20        y  = randn(6, 2), seed 21
    w1 = randn(3, 5), seed 22        b1 = randn(5),    seed 23
    w2 = randn(5, 2), seed 24        b2 = randn(2),    seed 25
  (each drawn in float32 from its own torch.Generator, then cast to float64),
    loss = mean((relu(x @ w1 + b1) @ w2 + b2 - y) ** 2)
           + log(sum(exp(w1.t()[0:2])))
  after one loss.backward(), saved by torch.save as
    {"x", "y", "params": {w1, b1, w2, b2}   (plain tensors, requires_grad=True leaves),
     "grads": {w1, b1, w2, b2}               (each .grad, cloned),
     "loss"}                                  (0-dim, detached)
then checked against torch.load(weights_only=True), and NAME.pt.json written
by torch_manifest.py. The test recomputes the loss and the gradients from
x, y and params and compares them with loss and grads (relative 1e-12).
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, HERE)

import make_fixtures  # noqa: E402  (imports torch)

NAME = "autograd_mlp"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=make_fixtures.DEFAULT_OUT,
                    help="fixture directory (default: %(default)s)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {make_fixtures.torch.__version__}")
    make_fixtures.build(NAME, args.out)


if __name__ == "__main__":
    main()
