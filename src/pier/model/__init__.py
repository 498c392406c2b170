"""What serving needs to know about a model beyond its weights: its chat template."""
