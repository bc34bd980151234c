"""Training recipes behind `tinyflow train`: the shared harness (common), image classifiers (vision),
the language model (language_model) and data-parallel training (distributed)."""
