"""What `tinyflow train` runs: the one training loop (loop.fit) and its checkpoints (checkpoint) and
metrics (metrics); the recipes that give the loop a model, its data and its step: image classifiers
(vision) and the LSTM language model (language_model); what a data-parallel run adds (distributed)."""
