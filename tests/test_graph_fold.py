"""Names of the Execution graph's chunking groups: the commonest op kinds of the run, layout-only ops left out."""
from __future__ import annotations

import collections

from tb_gpuinsight.analysis.graph import view as gv
from tb_gpuinsight.analysis.graph.build import build_graph
from tb_gpuinsight.analysis.graph.fold import _LAYOUT, group_label, short_name
from tb_gpuinsight.trace.et import load_et

from .corpus import corpus_path


def test_short_names_drop_the_wrapper_and_namespace():
    assert short_name("autograd::engine::evaluate_function: ConvolutionBackward0") == "ConvolutionBackward0"
    assert short_name("aten::addmm") == "addmm"
    assert short_name("torch::autograd::AccumulateGrad") == "AccumulateGrad"
    assert short_name("## forward ##") == "## forward ##"


def test_label_counts_work_before_layout_ops():
    units = ["aten::view"] * 9 + ["aten::addmm"] * 3 + ["aten::relu"] * 2 + ["aten::gelu"]
    assert group_label(units) == "addmm ×3, relu ×2, …"
    assert group_label(["aten::view", "aten::view"]) == "view ×2"  # only layout ops: they name it
    assert group_label([]) == "group"


def test_real_groups_are_named_by_their_commonest_ops():
    et = load_et(str(next(corpus_path("param/dlrm_8ranks").glob("worker0_*.et.json.gz"))))
    graph = build_graph(et, None, None)
    tree = gv.build_tree(graph)
    groups = [n for n in range(tree.n_rows, len(tree.parent))]
    assert groups
    for g in groups:
        units = [k for k in gv._preorder(tree, tree.children[g]) if k < tree.n_rows and tree.is_group(tree.parent[k])]
        kinds = collections.Counter(short_name(et.names[k]) for k in units)
        work = {k: n for k, n in kinds.items() if k not in _LAYOUT} or kinds
        first = tree.labels[g].split(",")[0].split(" ×")[0]
        assert work.get(first) == max(work.values()), (tree.labels[g], kinds.most_common(4))
