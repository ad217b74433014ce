#!/usr/bin/env python3
"""Regenerates crates/stowage-cli/tests/data/:
- types_as_values.pt: classes named by a pickle as values, never called (a
  builtin type, an allowed class, a class outside the allowlist), as
  omegaconf's `object_type: builtins.list` saves one; for `inspect --json`'s
  `type` values (issue 26, item 9);
- shared_object.pt: one object of a class outside the allowlist at three
  paths, the pickle reusing it through its memo (as transformers'
  `IntervalStrategy` members are); for `"objects"` (issue 26, item 8);
- objects_a.pt and objects_b.pt: the same paths holding inert objects of
  other classes (`nn.ReLU` against `nn.GELU`), and a module against the
  plain dict of what it holds; for `diff`'s `object` kind (issue 26, item 14);
- empty_containers.pt: an empty container of every type the contract lists
  by its container and `class` (defaultdict, Counter, Namespace, deque, set,
  frozenset) beside plain empty ones (issue 26, item 14).

usage: make_cli_type_fixture.py   (the python of scripts/torch-venv.sh)
"""
import argparse
import collections
import os

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crates", "stowage-cli",
                   "tests", "data", "types_as_values.pt")
os.makedirs(os.path.dirname(OUT), exist_ok=True)
torch.save({"t": list, "g": collections.OrderedDict, "c": torch.nn.Linear}, OUT)


class Strategy:  # pickled as __main__.Strategy
    def __init__(self, name):
        self.name = name


s = Strategy("steps")
torch.save({"eval": s, "save": s, "nested": {"log": s}, "w": torch.ones(2)},
           os.path.join(os.path.dirname(OUT), "shared_object.pt"))


class Box:  # pickled as __main__.Box
    def __init__(self, weight):
        self.weight = weight


w = torch.arange(4.0)
box = Box(w)
torch.save({"act": torch.nn.ReLU(), "box": box, "w": w},
           os.path.join(os.path.dirname(OUT), "objects_a.pt"))
torch.save({"act": torch.nn.GELU(), "box": {"weight": w}, "w": w},
           os.path.join(os.path.dirname(OUT), "objects_b.pt"))

torch.save({
    "dd": collections.defaultdict(int), "c": collections.Counter(), "ns": argparse.Namespace(),
    "dq": collections.deque(), "s": set(), "fs": frozenset(), "d": {}, "l": [], "t": (),
}, os.path.join(os.path.dirname(OUT), "empty_containers.pt"))
