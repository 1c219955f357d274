"""The graph IR's invariants: validate names the first broken one."""
import re

import numpy as np
import pytest

from autotune.graph import VIEW, Graph, Node, Value


def mlp() -> Graph:
    x, w, h, y, r = (Value("x", (3, 5), "float32"), Value("w", (5, 7), "float32"), Value("h", (3, 7), "float32"),
                     Value("y", (3, 7), "float32"), Value("r", (21,), "float32"))
    nodes = [Node("mm", "matmul", ("x", "w"), ("h",), dict(M=3, N=7, K=5)),
             Node("act", "relu", ("h",), ("y",), dict(shape=(3, 7))),
             Node("flat", VIEW, ("y",), ("r",))]
    return Graph([x], [r], {v.name: v for v in (x, w, h, y, r)}, {"w": np.ones((5, 7), np.float32)}, nodes, "mlp")


def test_a_well_formed_graph_validates_and_lists_its_kernels():
    g = mlp()
    g.validate()
    assert g.kernels() == [("matmul", dict(M=3, N=7, K=5), "float32"), ("relu", dict(shape=(3, 7)), "float32")]
    assert g.op_counts() == {"matmul": 1, "relu": 1, VIEW: 1}
    assert "h = matmul(x, w; M=3, N=7, K=5)  # mm" in str(g)


@pytest.mark.parametrize("breakage, message", [
    (lambda g: g.nodes.reverse(), "node 'flat' reads 'y' before anything produces it"),
    (lambda g: g.nodes.append(Node("again", "relu", ("h",), ("y",))), "'y' is produced twice"),
    (lambda g: g.constants.update(w=np.ones((5, 6), np.float32)), "constant 'w' is float32[5, 6]"),
    (lambda g: g.nodes[0].__setattr__("inputs", ("x", "nope")), "node 'mm' reads 'nope' before anything produces it"),
    (lambda g: g.values.update(r=Value("r", (20,), "float32")), "view node 'flat' changes the element count"),
    (lambda g: g.nodes.pop(), "output 'r' is never produced"),
])
def test_validate_names_what_is_broken(breakage, message):
    g = mlp()
    breakage(g)
    with pytest.raises(ValueError, match=re.escape(message)):
        g.validate()
