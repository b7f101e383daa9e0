"""The build pipeline: corpus -> vocab -> extract -> pca -> distill -> export (needs the ``build`` extra)."""
