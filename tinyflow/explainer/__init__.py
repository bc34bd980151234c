"""``tinyflow explain``: one real training step as a page a student can click through.

``tf.explain()`` (tracer.py) records the step as the objects that ran it: each Function's forward
and backward as a node, with its source, time, shapes, what it kept for backward and the kernels
it launched; page.py writes the record as one self-contained HTML file, its script and style
(assets/) inlined. ``tinyflow explain MODEL`` (tinyflow/commands/explain.py) runs a zoo model's
step under it.
"""
from tinyflow.explainer.tracer import Explanation, explain

__all__ = ["explain", "Explanation"]
