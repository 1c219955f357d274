"""The buffer plan: intermediates share memory by liveness, never while both are live; views alias
their input; inputs, constants and outputs stay out of the arena."""
import os
import sys

import numpy as np
from hypothesis import given, settings, strategies as st

from autotune.graph.planner import ALIGN, ARENA, CONSTANT, INPUT, OUTPUT, plan_buffers

sys.path.insert(0, os.path.dirname(__file__))
from graph_builder import GraphBuilder, dags, elementwise_graph


def chain(n, shape=(7, 5)):
    b = GraphBuilder("chain")
    v = b.input("x", shape)
    for _ in range(n):
        v = b.node("relu", (v,), shape, shape=shape)
    return b.build(v)


def test_a_chain_needs_two_buffers_whatever_its_length():
    plan = plan_buffers(chain(6))
    size = -(-7 * 5 * 4 // ALIGN) * ALIGN
    assert plan.unshared_bytes == 5 * size            # five intermediates, the sixth value is the output
    assert plan.arena_bytes == plan.live_peak_bytes == 2 * size < plan.unshared_bytes
    assert len(set(plan.offsets.values())) == 2


def test_views_alias_their_input_and_each_kind_of_root_is_placed_where_it_lives():
    b = GraphBuilder()
    x = b.input("x", (3, 4))
    w = b.const("w", np.ones((4, 6), np.float32))
    xv = b.view(x, (12,))
    h = b.node("matmul", (x, w), (3, 6), M=3, N=6, K=4)
    hv = b.view(h, (18,))
    r = b.node("relu", (hv,), (18,), shape=(18,))
    rv = b.view(r, (2, 9))
    wv = b.view(w, (24,))
    plan = plan_buffers(b.build(rv, xv, wv))
    assert plan.roots[xv] == x and plan.roots[hv] == h and plan.roots[rv] == r and plan.roots[wv] == w
    assert plan.kinds == {x: INPUT, w: CONSTANT, h: ARENA, r: OUTPUT}
    assert list(plan.offsets) == [h] and plan.lifetimes[h] == (1, 3)   # read through its view by node 3


def test_a_value_nobody_reads_lives_through_its_producer_only():
    b = GraphBuilder()
    x = b.input("x", (4,))
    b.node("relu", (x,), (4,), shape=(4,))
    y = b.node("relu", (x,), (4,), shape=(4,))
    plan = plan_buffers(b.build(y))
    assert plan.lifetimes == {"v0_relu": (0, 0)}


@settings(max_examples=200, deadline=None)
@given(dags(), st.sampled_from([(5, 3), (1,), (17,)]))
def test_two_live_values_never_overlap(dag, shape):
    edges, n_outputs = dag
    g = elementwise_graph(edges, n_outputs, shape)
    plan = plan_buffers(g)
    arena = list(plan.offsets)
    for i, a in enumerate(arena):
        assert plan.offsets[a] % ALIGN == 0 and plan.offsets[a] + plan.sizes[a] <= plan.arena_bytes
        for b in arena[i + 1:]:
            (a0, a1), (b0, b1) = plan.lifetimes[a], plan.lifetimes[b]
            if a0 <= b1 and b0 <= a1:
                assert (plan.offsets[a] + plan.sizes[a] <= plan.offsets[b]
                        or plan.offsets[b] + plan.sizes[b] <= plan.offsets[a]), (a, b)
    assert plan.live_peak_bytes <= plan.arena_bytes <= plan.unshared_bytes
    outputs = {v.name for v in g.outputs}
    assert not outputs & set(arena) and all(plan.kinds[o] == OUTPUT for o in outputs)
